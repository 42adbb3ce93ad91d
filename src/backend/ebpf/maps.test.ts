// The byte strings the dataplane keeps its map contents in match the byte layouts (maps.ts).
import { Yielder } from '../../util/yielder';
import { BackendWriter, decodeSvcValue, encodeBackend, encodeSvcKey, encodeSvcValue, isHeadKey, slotOfKey, slotValuesBuffer, SvcKeyWriter, svcIdOfValue, svcValueBytes, vipProtoOfKey, type SvcValue } from './maps';

test('svcValueBytes is encodeSvcValue as a byte string, and svcIdOfValue reads the service id back', () => {
  const values: SvcValue[] = [
    { backendId: 0, count: 0, affinitySeconds: 0, svcId: 0, flags: 0 },
    { backendId: 1, count: 10, affinitySeconds: 10800, svcId: 7, flags: 1 },
    { backendId: 0xfffffffe, count: 65535, affinitySeconds: 86400, svcId: 0xfedcba98, flags: 0 },
  ];
  for (const v of values) {
    const s = svcValueBytes(v);
    expect(s).toHaveLength(20);
    expect(Buffer.from(s, 'latin1').equals(encodeSvcValue(v))).toBe(true);
    expect(decodeSvcValue(Buffer.from(s, 'latin1'))).toEqual(v);
    expect(svcIdOfValue(s)).toBe(v.svcId);
  }
});

test('the writers give the encoders\' bytes, whatever was written before', async () => {
  const keys = new SvcKeyWriter(), backend = new BackendWriter();
  // IPv6 first: its bytes must not survive into the IPv4 entries written after it.
  const cases: Array<[string, number, number]> = [['fd00:10:96::1', 443, 6], ['10.96.0.1', 80, 17], ['2001:db8::ffff:1', 53, 132], ['192.168.255.254', 65535, 6]];
  for (const [addr, port, proto] of cases) {
    keys.at(addr, port, proto);
    for (const slot of [0, 1, 2, 255, 256, 300, 65535]) {
      const k = keys.slotKey(slot);
      const encoded = encodeSvcKey({ addr, port, proto, slot });
      expect(Buffer.from(k, 'latin1').equals(encoded)).toBe(true);
      expect(slotOfKey(k)).toBe(slot);
      expect(isHeadKey(k)).toBe(slot === 0);
      expect(Buffer.from(vipProtoOfKey(k), 'latin1').equals(encoded.subarray(0, 19))).toBe(true);
    }
    backend.at(addr, port);
    expect(Buffer.from(backend.value(), 'latin1').equals(encodeBackend({ addr, port }))).toBe(true);
    // The endpoint key: the backend's bytes, then the service port and protocol; different per port.
    const ek = backend.endpointKey(8080, proto);
    expect(ek.slice(0, 20)).toBe(backend.value());
    expect(ek).not.toBe(backend.endpointKey(8081, proto));
  }
  const ids = [1, 255, 0x12345678, 0xfffffffe];
  const b = await slotValuesBuffer(ids, (id) => id, new Yielder(0));
  ids.forEach((id, i) => expect(decodeSvcValue(b, i * 20)).toEqual({ backendId: id, count: 0, affinitySeconds: 0, svcId: 0, flags: 0 }));
});
