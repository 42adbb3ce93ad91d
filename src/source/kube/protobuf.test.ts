// Edge cases of the protobuf decoder that a real API server does not produce on demand: fields
// it does not know, wire types it does not expect, negative int32s, truncation, hostile map keys,
// frames split anywhere. test/e2e/kube-protobuf.test.ts checks real objects against their JSON.
import { decodeList, decodeObject, decodeStatus, decodeWatchEvent, FrameSplitter, ProtobufError } from './protobuf';

// A minimal encoder for the tests.
const varint = (n: bigint | number): number[] => {
  let v = BigInt.asUintN(64, BigInt(n));
  const out: number[] = [];
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
  return out;
};
const tag = (no: number, wire: number) => varint((no << 3) | wire);
const int = (no: number, v: number | bigint) => [...tag(no, 0), ...varint(v)];
const bytes = (no: number, b: number[]) => [...tag(no, 2), ...varint(b.length), ...b];
const str = (no: number, s: string) => bytes(no, [...Buffer.from(s, 'utf8')]);
const msg = (no: number, ...fields: number[][]) => bytes(no, fields.flat());
const entry = (no: number, k: string, v: string) => msg(no, str(1, k), str(2, v));
/** "k8s\0" + runtime.Unknown { typeMeta { kind }, raw }. */
const envelope = (kind: string, ...fields: number[][]) => Buffer.from([0x6b, 0x38, 0x73, 0x00, ...msg(1, str(1, 'v1'), str(2, kind)), ...bytes(2, fields.flat())]);
const frame = (b: number[]) => { const h = Buffer.alloc(4); h.writeUInt32BE(b.length); return Buffer.concat([h, Buffer.from(b)]); };

const meta = (name: string, ...more: number[][]) => msg(1, str(1, name), str(3, 'default'), str(6, '42'), ...more);

describe('protobuf decoder', () => {
  test('a Service: known fields in JSON shape, unknown ones and unexpected wire types skipped, empty strings left out', () => {
    const buf = envelope('Service',
      meta('web', entry(11, 'app', 'web'), entry(12, 'a', ''), msg(17, str(1, 'manager'))), // managedFields skipped
      msg(2,
        msg(1, str(1, 'http'), str(2, 'TCP'), int(3, 80), msg(4, int(1, 0), int(2, 8080)), int(5, 30080)),
        str(3, '10.96.0.10'), str(4, 'NodePort'), str(7, ''), int(12, -1),
        str(18, '10.96.0.10'), str(18, 'fd00::10'),
        int(23, 7), // trafficDistribution sent as a varint: not a string, skipped
        [0x5d, 1, 2, 3, 4], // field 11 as fixed32: skipped
        [0x99, 0x01, 1, 2, 3, 4, 5, 6, 7, 8], // field 19 as fixed64: skipped
        str(99, 'from a newer API'),
      ),
      msg(3, msg(1, msg(1, str(1, '192.0.2.1'), str(3, 'Proxy')), msg(1, str(2, 'lb.example.com')))),
    );
    expect(decodeObject('Service', buf)).toEqual({
      metadata: { name: 'web', namespace: 'default', resourceVersion: '42', labels: { app: 'web' }, annotations: { a: '' } },
      spec: { ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }], clusterIP: '10.96.0.10', type: 'NodePort', healthCheckNodePort: -1, clusterIPs: ['10.96.0.10', 'fd00::10'] },
      status: { loadBalancer: { ingress: [{ ip: '192.0.2.1', ipMode: 'Proxy' }, { hostname: 'lb.example.com' }] } },
    });
  });

  test('an EndpointSlice: conditions only when set, hints, several addresses', () => {
    const buf = envelope('EndpointSlice',
      meta('s1', entry(11, 'kubernetes.io/service-name', 'web')),
      msg(2, str(1, '10.0.0.1'), str(1, '10.0.0.2'), msg(2, int(1, 1), int(3, 0)), msg(4, str(2, 'pod')), str(6, 'n1'), str(7, 'z1'),
        msg(8, msg(1, str(1, 'z1')), msg(2, str(1, 'n1')))),
      msg(2, str(1, '10.0.0.3'), msg(2)),
      msg(3, str(1, 'http'), str(2, 'TCP'), int(3, 8080)),
      msg(3, str(1, 'all')),
      str(4, 'IPv4'),
    );
    expect(decodeObject('EndpointSlice', buf)).toEqual({
      metadata: { name: 's1', namespace: 'default', resourceVersion: '42', labels: { 'kubernetes.io/service-name': 'web' } },
      endpoints: [
        { addresses: ['10.0.0.1', '10.0.0.2'], conditions: { ready: true, terminating: false }, nodeName: 'n1', zone: 'z1', hints: { forZones: [{ name: 'z1' }], forNodes: [{ name: 'n1' }] } },
        { addresses: ['10.0.0.3'], conditions: {} },
      ],
      ports: [{ name: 'http', protocol: 'TCP', port: 8080 }, { name: 'all' }],
      addressType: 'IPv4',
    });
  });

  test('a Node: taints, addresses, the deletion timestamp as RFC 3339', () => {
    const buf = envelope('Node',
      msg(1, str(1, 'n1'), msg(9, int(1, 1764201600), int(2, 5))),
      msg(2, str(1, '10.244.0.0/24'), msg(5, str(1, 'ToBeDeletedByClusterAutoscaler'), str(3, 'NoSchedule'))),
      msg(3, msg(1, entry(1, 'cpu', 'x')), msg(5, str(1, 'InternalIP'), str(2, '192.168.1.1'))),
    );
    expect(decodeObject('Node', buf)).toEqual({
      metadata: { name: 'n1', deletionTimestamp: '2025-11-27T00:00:00Z' },
      spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] },
      status: { addresses: [{ type: 'InternalIP', address: '192.168.1.1' }] },
    });
  });

  test('a map key "__proto__" is dropped, not turned into the prototype', () => {
    const o = decodeObject('Node', envelope('Node', msg(1, str(1, 'n1'), entry(11, '__proto__', 'x'), entry(11, 'ok', 'y'))));
    const labels = (o.metadata as { labels: Record<string, string> }).labels;
    expect(Object.getPrototypeOf(labels)).toBe(Object.prototype);
    expect(Object.keys(labels)).toEqual(['ok']);
  });

  test('int32 fields keep their sign; lengths past their message, truncation and a missing prefix are errors', () => {
    const svc = (p: number[][]) => envelope('Service', msg(2, msg(1, ...p)));
    expect(decodeObject('Service', svc([int(3, -5)]))).toEqual({ spec: { ports: [{ port: -5 }] } });
    expect(decodeObject('Service', svc([int(3, 2 ** 31 - 1)]))).toEqual({ spec: { ports: [{ port: 2 ** 31 - 1 }] } });
    const good = svc([str(1, 'http')]);
    expect(() => decodeObject('Service', good.subarray(0, good.length - 1))).toThrow(ProtobufError);
    const lying = Buffer.from(good);
    lying[lying.length - 5] = 0x7f; // the port message's length, far past its parent's end
    expect(() => decodeObject('Service', lying)).toThrow(/runs past its message|truncated|read to/);
    expect(() => decodeObject('Service', Buffer.from('{"kind":"Service"}'))).toThrow(/no "k8s\\0" prefix/);
    expect(() => decodeObject('Service', Buffer.from([...envelope('Service'), ...str(3, 'gzip')]))).toThrow(/content encoding "gzip"/);
    expect(() => decodeObject('Service', envelope('Service', [0x0b]))).toThrow(/wire type 3/);
  });

  test('a Status in place of an object, an error response, a list', () => {
    const status = envelope('Status', msg(1), str(2, 'Failure'), str(3, 'too old resource version'), str(4, 'Expired'), int(6, 410));
    const expected = { kind: 'Status', status: 'Failure', message: 'too old resource version', reason: 'Expired', code: 410 };
    expect(decodeObject('EndpointSlice', status)).toEqual(expected);
    expect(decodeStatus(status)).toEqual(expected);
    expect(decodeList('Service', status)).toEqual(expected);
    const list = envelope('ServiceList', msg(1, str(2, '77'), str(3, 'token')), msg(2, meta('a')), msg(2, meta('b')));
    expect(decodeList('Service', list)).toEqual({
      metadata: { resourceVersion: '77', continue: 'token' },
      items: [{ metadata: { name: 'a', namespace: 'default', resourceVersion: '42' } }, { metadata: { name: 'b', namespace: 'default', resourceVersion: '42' } }],
    });
  });

  test('watch frames split anywhere, one large frame across many chunks, oversized frames refused', () => {
    const ev = (type: string, name: string) => frame([...str(1, type), ...msg(2, bytes(1, [...envelope('Service', meta(name))]))]);
    const big = 'x'.repeat(200_000);
    const stream = Buffer.concat([ev('ADDED', 'a'), ev('MODIFIED', big), ev('DELETED', 'c')]);
    for (const step of [1, 3, 4, 5, 1000, 65536, stream.length]) {
      const got: string[] = [];
      const f = new FrameSplitter();
      for (let i = 0; i < stream.length; i += step) {
        f.push(stream.subarray(i, i + step), (b, s, e) => {
          const w = decodeWatchEvent('Service', b, s, e);
          got.push(`${w.type} ${(w.object?.metadata as { name: string }).name.slice(0, 3)}`);
        });
      }
      expect(got).toEqual(['ADDED a', 'MODIFIED xxx', 'DELETED c']);
      expect(f.leftover).toBe(0);
    }
    const f = new FrameSplitter(1000);
    expect(() => f.push(ev('MODIFIED', big), () => undefined)).toThrow(/watch frame of \d+ bytes \(more than 1000\)/);
    const cut = new FrameSplitter();
    cut.push(ev('ADDED', 'a').subarray(0, 10), () => { throw new Error('no frame yet'); });
    expect(cut.leftover).toBe(10);
  });
});
