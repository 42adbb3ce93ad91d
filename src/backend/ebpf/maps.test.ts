// The byte strings the dataplane keeps its map contents in match the byte layouts (maps.ts).
import { ByteWriter, decodeSvcValue, encodeBackend, encodeSvcKey, encodeSvcValue, isHeadKey, svcIdOfValue, vipProtoOfKey, writeBackend, writeSvcKey, writeSvcValue, type SvcValue } from './maps';

test('writeSvcValue gives encodeSvcValue\'s bytes, and svcIdOfValue reads the service id back', () => {
  const values: SvcValue[] = [
    { backendId: 0, count: 0, affinitySeconds: 0, svcId: 0, flags: 0 },
    { backendId: 1, count: 10, affinitySeconds: 10800, svcId: 7, flags: 1 },
    { backendId: 0xfffffffe, count: 65535, affinitySeconds: 86400, svcId: 0xfedcba98, flags: 0 },
  ];
  const w = new ByteWriter(4);   // smaller than one value: it grows
  for (const v of values) {
    writeSvcValue(w.reset(), v);
    const s = w.text();
    expect(s).toHaveLength(20);
    expect(Buffer.from(s, 'latin1').equals(encodeSvcValue(v))).toBe(true);
    expect(decodeSvcValue(Buffer.from(s, 'latin1'))).toEqual(v);
    expect(svcIdOfValue(s)).toBe(v.svcId);
    expect(svcIdOfValue('x' + s, 1)).toBe(v.svcId);
  }
});

test('the writers give the encoders\' bytes, whatever was written before', () => {
  const w = new ByteWriter(8);
  // IPv6 first: its bytes must not survive into the IPv4 entries written after it.
  const cases: Array<[string, number, number]> = [['fd00:10:96::1', 443, 6], ['10.96.0.1', 80, 17], ['2001:db8::ffff:1', 53, 132], ['192.168.255.254', 65535, 6]];
  for (const [addr, port, proto] of cases) {
    for (const slot of [0, 1, 2, 255, 256, 300, 65535]) {
      writeSvcKey(w.reset(), addr, port, proto, slot);
      const k = w.text();
      const encoded = encodeSvcKey({ addr, port, proto, slot });
      expect(Buffer.from(k, 'latin1').equals(encoded)).toBe(true);
      expect(k.charCodeAt(20) | (k.charCodeAt(21) << 8)).toBe(slot);
      expect(isHeadKey(k)).toBe(slot === 0);
      expect(Buffer.from(vipProtoOfKey(k), 'latin1').equals(encoded.subarray(0, 19))).toBe(true);
    }
    writeBackend(w.reset(), addr, port);
    expect(w.bytes().equals(encodeBackend({ addr, port }))).toBe(true);
  }
  // Parts of byte strings, copied at any offset.
  w.reset();
  w.latin1('abcdef', 2, 3);
  w.latin1('xy');
  expect(w.text()).toBe('cdexy');
});
