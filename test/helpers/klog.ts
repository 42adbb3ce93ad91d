// Reading kpng's log lines back: klog's header (month, day, time with microseconds, the pid right-aligned
// in 7 columns, the source token), then the message. Tests, benches and the demo use it to find
// messages by severity without depending on the timestamp.
export const KLOG_LINE = /^([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) ([ \d]{7}|\d{8,}) ([^ \]]+)\] (.*)$/s;

export interface KlogLine {
  severity: 'I' | 'W' | 'E' | 'F';
  month: number;
  day: number;
  time: string;
  pid: number;
  source: string;
  message: string;
}

/** The parts of a klog line, or undefined when `line` is not one. */
export function parseKlogLine(line: string): KlogLine | undefined {
  const m = KLOG_LINE.exec(line);
  if (!m) return undefined;
  return { severity: m[1] as KlogLine['severity'], month: Number(m[2]), day: Number(m[3]), time: `${m[4]}:${m[5]}:${m[6]}.${m[7]}`, pid: Number(m[8]), source: m[9], message: m[10] };
}

const PREFIX: Record<KlogLine['severity'], string> = { I: '', W: 'warn: ', E: 'error: ', F: 'fatal: ' };

/** `warn: message`, `error: message` or `message` (info): what a test compares; throws on a line that is not klog's. */
export function severityAndMessage(line: string): string {
  const l = parseKlogLine(line);
  if (!l) throw new Error(`not a klog line: ${JSON.stringify(line)}`);
  return PREFIX[l.severity] + l.message;
}

/** The messages of kpng's stderr lines written at `severity` (other lines are skipped). */
export function messagesAt(stderr: string, severity: KlogLine['severity']): string[] {
  return stderr.split('\n').map(parseKlogLine).filter((l): l is KlogLine => l?.severity === severity).map((l) => l.message);
}
