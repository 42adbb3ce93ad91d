// sameElem decides whether a diff rewrites an element: every field of every kind must count.
import { sameElem } from './program';
import type { Elem } from './types';

const kinds: Elem[] = [
  { type: 'vip', addr: '10.96.0.1', proto: 'tcp', port: 80, verdict: { goto: 'svc-a' } },
  { type: 'vip', addr: '10.96.0.1', proto: 'tcp', port: 80, verdict: 'drop' },
  { type: 'port', proto: 'udp', port: 30053, verdict: { goto: 'svc-b' } },
  { type: 'pick', addr: '10.96.0.1', proto: 'tcp', port: 80, slot: 2, epAddr: '10.244.0.5', epPort: 8080 },
  { type: 'pick', proto: 'tcp', port: 30080, slot: 0, epAddr: '10.244.0.6', epPort: 8080 },
  { type: 'pair', addr: '10.244.0.5' },
  { type: 'addr', addr: '10.96.0.1' },
];

/** Each variant of `e` with one field changed. */
function variants(e: Elem): Elem[] {
  const out: Elem[] = [];
  for (const [k, v] of Object.entries(e)) {
    if (k === 't') continue;
    const changed = typeof v === 'number' ? v + 1 : typeof v === 'string' ? (k === 'proto' ? 'sctp' : `${v}x`) : v === undefined ? 'x' : 'drop';
    out.push({ ...e, [k]: changed } as Elem);
    if (k === 'v' && v !== 'drop') out.push({ ...e, verdict: { goto: `${(v as { goto: string }).goto}2` } } as Elem);
    if (k === 'v' && v === 'drop') out.push({ ...e, verdict: { goto: 'x' } } as Elem);
  }
  return out;
}

test('equal content is the same element, whatever the object', () => {
  for (const e of kinds) expect(sameElem(e, structuredClone(e))).toBe(true);
});

test('a change of any one field, or of kind, is a different element', () => {
  for (const e of kinds) {
    const vs = variants(e);
    expect(vs.length).toBeGreaterThan(0);
    for (const v of vs) expect(sameElem(e, v)).toBe(false);
    for (const other of kinds) if (other !== e && JSON.stringify(other) !== JSON.stringify(e)) expect(sameElem(e, other)).toBe(false);
  }
});
