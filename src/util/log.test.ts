import { createLogger, type LogFormat } from './log';
import { KLOG_LINE, parseKlogLine } from '../../test/helpers/klog';

// 2 January, 03:04:05.678 local time: klog writes local time.
const AT = new Date(2026, 0, 2, 3, 4, 5, 678).getTime();

function capture(opts: { format?: LogFormat; verbosity?: number; level?: 'debug' | 'info' | 'warn' | 'error' } = {}) {
  const lines: string[] = [];
  const log = createLogger({ ...opts, write: (l) => lines.push(l), now: () => AT, pid: 4242 });
  return { log, lines };
}

describe('text format: klog\'s header', () => {
  test('severity letter, mmdd, time with microseconds, pid in 7 columns, source token, message', () => {
    const { log, lines } = capture();
    log.info('kube: listed 3 Services');
    log.warn('skipping Service default/x: no ports');
    log.error('nft: sync failed');
    expect(lines).toEqual([
      'I0102 03:04:05.678000    4242 kpng:0] kube: listed 3 Services',
      'W0102 03:04:05.678000    4242 kpng:0] skipping Service default/x: no ports',
      'E0102 03:04:05.678000    4242 kpng:0] nft: sync failed',
    ]);
  });

  test('a line parses with a klog header regex, whatever the clock says', () => {
    const lines: string[] = [];
    createLogger({ write: (l) => lines.push(l) }).warn('w');
    // klog's own layout, written out independently of the helper's regex.
    expect(lines[0]).toMatch(/^W\d{4} \d\d:\d\d:\d\d\.\d{6} [ \d]{7} kpng:0\] w$/);
    expect(lines[0]).toMatch(KLOG_LINE);
    expect(parseKlogLine(lines[0])).toMatchObject({ severity: 'W', pid: process.pid, source: 'kpng:0', message: 'w' });
  });

  test('an error value goes in err=, quoted', () => {
    const { log, lines } = capture();
    log.error('cannot start', new Error('listen EADDRINUSE "127.0.0.1:10249"'));
    expect(lines).toEqual(['E0102 03:04:05.678000    4242 kpng:0] cannot start err="listen EADDRINUSE \\"127.0.0.1:10249\\""']);
  });
});

describe('verbosity: debug is V(4)', () => {
  test.each([
    [{}, ['I info', 'W warn', 'E error']],
    [{ verbosity: 3 }, ['I info', 'W warn', 'E error']],
    [{ verbosity: 4 }, ['I debug', 'I info', 'W warn', 'E error']],
    [{ level: 'debug' as const }, ['I debug', 'I info', 'W warn', 'E error']],
    [{ level: 'warn' as const }, ['W warn', 'E error']],
    [{ level: 'warn' as const, verbosity: 10 }, ['W warn', 'E error']],
    [{ level: 'error' as const }, ['E error']],
  ])('%j', (opts, want) => {
    const { log, lines } = capture(opts);
    log.debug('debug');
    log.info('info');
    log.warn('warn');
    log.error('error');
    expect(lines.map((l) => { const p = parseKlogLine(l)!; return `${p.severity} ${p.message}`; })).toEqual(want);
  });

  test('the positional form (level, write) still works and writes klog lines', () => {
    const lines: string[] = [];
    const log = createLogger('warn', (l) => lines.push(l));
    log.info('not shown');
    log.warn('shown');
    expect(lines).toHaveLength(1);
    expect(parseKlogLine(lines[0])).toMatchObject({ severity: 'W', message: 'shown' });
  });
});

describe('json format: component-base\'s JSON logger', () => {
  test('ts in milliseconds since the epoch, caller, msg, v; errors carry err and no v', () => {
    const { log, lines } = capture({ format: 'json', verbosity: 4 });
    log.debug('jit: on');
    log.info('kube: synced');
    log.warn('skipping "x"\nsecond line');
    log.error('failed', new Error('boom'));
    log.error('failed without a value');
    const recs = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.every((l) => !l.includes('\n'))).toBe(true);
    expect(recs).toEqual([
      { ts: AT, caller: 'kpng:0', msg: 'jit: on', v: 4 },
      { ts: AT, caller: 'kpng:0', msg: 'kube: synced', v: 0 },
      { ts: AT, caller: 'kpng:0', msg: 'skipping "x"\nsecond line', v: 0 },
      { ts: AT, caller: 'kpng:0', msg: 'failed', err: 'boom' },
      { ts: AT, caller: 'kpng:0', msg: 'failed without a value' },
    ]);
    // Field order as zap writes them: ts, caller, msg first.
    expect(Object.keys(recs[1]).slice(0, 3)).toEqual(['ts', 'caller', 'msg']);
  });

  test('debug is left out below verbosity 4', () => {
    const { log, lines } = capture({ format: 'json' });
    log.debug('hidden');
    log.info('shown');
    expect(lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(['shown']);
  });
});
