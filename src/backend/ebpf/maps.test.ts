// The hex encodings the dataplane keeps its map contents in match the byte layouts (maps.ts).
import { backendHex, backendIdOfHex, decodeSvcValue, encodeBackend, encodeSvcKey, encodeSvcValue, isHeadHex, slotOfHex, slotValueHex, SvcKeyWriter, svcValueHex, type SvcValue } from './maps';

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

test('the scratch-buffer writers give the same hex as the encoders, whatever was written before', () => {
  const keys = new SvcKeyWriter();
  // IPv6 first: its bytes must not survive into the IPv4 entries written after it.
  const cases: Array<[string, number, number]> = [['fd00:10:96::1', 443, 6], ['10.96.0.1', 80, 17], ['2001:db8::ffff:1', 53, 132], ['192.168.255.254', 65535, 6]];
  for (const [addr, port, proto] of cases) {
    keys.at(addr, port, proto);
    for (const slot of [0, 1, 2, 256, 300, 65535]) {
      const hex = keys.slotHex(slot);
      expect(hex).toBe(encodeSvcKey({ addr, port, proto, slot }).toString('hex'));
      expect(slotOfHex(hex)).toBe(slot);
      expect(isHeadHex(hex)).toBe(slot === 0);
    }
    expect(backendHex(addr, port)).toBe(encodeBackend({ addr, port }).toString('hex'));
  }
  for (const id of [1, 255, 0x12345678, 0xfffffffe]) {
    svcValueHex({ backendId: 9, count: 9, affinitySeconds: 9, svcId: 9, flags: 1 });
    expect(slotValueHex(id)).toBe(svcValueHex({ backendId: id, count: 0, affinitySeconds: 0, svcId: 0, flags: 0 }));
  }
});
