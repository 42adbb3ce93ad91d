// The hex encodings the dataplane keeps its map contents in match the byte layouts (maps.ts).
import { backendIdOfHex, decodeSvcValue, encodeSvcValue, svcValueHex, type SvcValue } from './maps';

test('svcValueHex is encodeSvcValue as hex, and backendIdOfHex reads the id back', () => {
  const values: SvcValue[] = [
    { backendId: 0, count: 0, affinitySeconds: 0, svcId: 0, flags: 0 },
    { backendId: 1, count: 10, affinitySeconds: 10800, svcId: 7, flags: 1 },
    { backendId: 0xfffffffe, count: 65535, affinitySeconds: 86400, svcId: 0x12345678, flags: 0 },
  ];
  for (const v of values) {
    const hex = svcValueHex(v);
    expect(hex).toBe(encodeSvcValue(v).toString('hex'));
    expect(decodeSvcValue(Buffer.from(hex, 'hex'))).toEqual(v);
    expect(backendIdOfHex(hex)).toBe(v.backendId);
  }
});
