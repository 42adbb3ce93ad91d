// Key builders and the encoder's libnftnl attribute ids (checked against the compiled addon).
import { A, EXPR_ATTRS, NftBatch } from './encode';
import { concat, dataTypeId, dataTypeLen, ifname, ipAddr, ipv4, ipv6, port, proto, u32host } from './index';
import { gated, need } from '../../test/helpers/gate';
import { loadTestNative } from '../../test/helpers/test-native';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

test('address, port, protocol and concatenation builders', () => {
  expect(hex(ipv4('10.96.0.1'))).toBe('0a600001');
  expect(() => ipv4('10.0.0')).toThrow();
  expect(() => ipv4('10.0.0.256')).toThrow();
  expect(hex(ipv6('::1'))).toBe('00000000000000000000000000000001');
  expect(hex(ipv6('fd00:10:96::a'))).toBe('fd000010009600000000000000000000'.slice(0, 28) + '000a');
  expect(hex(ipv6('::ffff:10.1.2.3'))).toBe('00000000000000000000ffff0a010203');
  expect(hex(ipv6('2001:db8::'))).toBe('20010db8000000000000000000000000');
  expect(() => ipv6('1::2::3')).toThrow();
  expect(hex(ipAddr('fe80::1'))).toBe('fe800000000000000000000000000001');
  expect(hex(port(8080))).toBe('1f90');
  expect(hex(proto('udp'))).toBe('11');
  expect(hex(u32host(1))).toBe('01000000');
  expect(hex(ifname('eth0'))).toBe('65746830' + '00'.repeat(12));
  expect(hex(concat(ipv4('1.2.3.4'), proto('tcp'), port(80)))).toBe('01020304' + '06000000' + '00500000');
  expect(dataTypeLen(['ipv4_addr', 'inet_proto', 'inet_service'])).toBe(12);
  expect(dataTypeLen('inet_service')).toBe(2);
  expect(dataTypeId(['ipv4_addr', 'inet_proto', 'inet_service'])).toBe(((7 << 6) | 12) << 6 | 13);
});

test('the encoder writes one compact buffer', () => {
  const b = new NftBatch();
  b.add({ op: 'add', table: { family: 'ip', name: 't' } });
  b.beginElements('add', { family: 'ip', table: 't', set: 's' });
  for (let i = 0; i < 1000; i++) b.element({ key: ipv4(`10.0.${i >> 8}.${i & 255}`), verdict: { goto: 'c' } });
  const buf = b.finish();
  expect(buf.readUInt32LE(0)).toBe(0x42504e4b);
  expect(buf.readUInt32LE(8)).toBe(2);
  expect(buf.length).toBeLessThan(1000 * 48);
  expect(b.descs.map((d) => d.object)).toEqual(['table ip t', 'set ip t s']);
});

gated(need.testNative()).test('encoder attribute ids match the libnftnl headers the addons were built with', () => {
  const c = loadTestNative().constants;
  expect(c.NFTNL_TABLE_USERDATA).toBe(A.TABLE_USERDATA);
  expect([c.NFTNL_CHAIN_NAME, c.NFTNL_CHAIN_TABLE, c.NFTNL_CHAIN_HOOKNUM, c.NFTNL_CHAIN_PRIO, c.NFTNL_CHAIN_POLICY,
    c.NFTNL_CHAIN_TYPE, c.NFTNL_CHAIN_DEV, c.NFTNL_CHAIN_USERDATA]).toEqual([A.CHAIN_NAME, A.CHAIN_TABLE, A.CHAIN_HOOKNUM,
    A.CHAIN_PRIO, A.CHAIN_POLICY, A.CHAIN_TYPE, A.CHAIN_DEV, A.CHAIN_USERDATA]);
  expect([c.NFTNL_SET_TABLE, c.NFTNL_SET_NAME, c.NFTNL_SET_FLAGS, c.NFTNL_SET_KEY_TYPE, c.NFTNL_SET_KEY_LEN,
    c.NFTNL_SET_DATA_TYPE, c.NFTNL_SET_DATA_LEN, c.NFTNL_SET_ID, c.NFTNL_SET_POLICY, c.NFTNL_SET_DESC_SIZE,
    c.NFTNL_SET_TIMEOUT, c.NFTNL_SET_GC_INTERVAL, c.NFTNL_SET_USERDATA, c.NFTNL_SET_DESC_CONCAT]).toEqual([A.SET_TABLE,
    A.SET_NAME, A.SET_FLAGS, A.SET_KEY_TYPE, A.SET_KEY_LEN, A.SET_DATA_TYPE, A.SET_DATA_LEN, A.SET_ID, A.SET_POLICY,
    A.SET_DESC_SIZE, A.SET_TIMEOUT, A.SET_GC_INTERVAL, A.SET_USERDATA, A.SET_DESC_CONCAT]);
  expect([c.NFTNL_RULE_TABLE, c.NFTNL_RULE_CHAIN, c.NFTNL_RULE_HANDLE, c.NFTNL_RULE_POSITION, c.NFTNL_RULE_USERDATA])
    .toEqual([A.RULE_TABLE, A.RULE_CHAIN, A.RULE_HANDLE, A.RULE_POSITION, A.RULE_USERDATA]);
  const E = EXPR_ATTRS;
  expect(c.NFTNL_EXPR_PAYLOAD_DREG).toBe(E.payload.dreg[0]);
  expect(c.NFTNL_EXPR_PAYLOAD_SREG).toBe(E.payload.sreg[0]);
  expect(c.NFTNL_EXPR_NG_OFFSET).toBe(E.numgen.offset[0]);
  expect(c.NFTNL_EXPR_META_SREG).toBe(E.meta.sreg[0]);
  expect(c.NFTNL_EXPR_CMP_DATA).toBe(E.cmp.data[0]);
  expect(c.NFTNL_EXPR_RANGE_TO_DATA).toBe(E.range.to[0]);
  expect(c.NFTNL_EXPR_IMM_CHAIN).toBe(E.immediate.chain[0]);
  expect(c.NFTNL_EXPR_CTR_BYTES).toBe(E.counter.bytes[0]);
  expect(c.NFTNL_EXPR_BITWISE_XOR).toBe(E.bitwise.xor[0]);
  expect(c.NFTNL_EXPR_NAT_FLAGS).toBe(E.nat.flags[0]);
  expect(c.NFTNL_EXPR_LOOKUP_FLAGS).toBe(E.lookup.flags[0]);
  expect(c.NFTNL_EXPR_DYNSET_SET_ID).toBe(E.dynset.setId[0]);
  expect(c.NFTNL_EXPR_LOG_LEVEL).toBe(E.log.level[0]);
  expect(c.NFTNL_EXPR_CT_SREG).toBe(E.ct.sreg[0]);
  expect(c.NFTNL_EXPR_LIMIT_FLAGS).toBe(E.limit.flags[0]);
  expect(c.NFTNL_EXPR_REJECT_CODE).toBe(E.reject.code[0]);
  expect(c.NFTNL_EXPR_MASQ_REG_PROTO_MAX).toBe(E.masq.regProtoMax[0]);
  expect(c.NFTNL_EXPR_FIB_FLAGS).toBe(E.fib.flags[0]);
  expect([c.NFTNL_FLOWTABLE_NAME, c.NFTNL_FLOWTABLE_TABLE, c.NFTNL_FLOWTABLE_HOOKNUM, c.NFTNL_FLOWTABLE_PRIO, c.NFTNL_FLOWTABLE_DEVICES,
    c.NFTNL_FLOWTABLE_FLAGS]).toEqual([A.FLOWTABLE_NAME, A.FLOWTABLE_TABLE, A.FLOWTABLE_HOOKNUM, A.FLOWTABLE_PRIO, A.FLOWTABLE_DEVICES,
    A.FLOWTABLE_FLAGS]);
  expect([c.NFTNL_EXPR_BYTEORDER_DREG, c.NFTNL_EXPR_BYTEORDER_SREG, c.NFTNL_EXPR_BYTEORDER_OP, c.NFTNL_EXPR_BYTEORDER_LEN,
    c.NFTNL_EXPR_BYTEORDER_SIZE, c.NFTNL_EXPR_FLOW_TABLE_NAME]).toEqual([E.byteorder.dreg[0], E.byteorder.sreg[0], E.byteorder.op[0],
    E.byteorder.len[0], E.byteorder.size[0], E.flow_offload.table[0]]);
});

test('encoding does not depend on buffer growth', () => {
  const fill = (b: NftBatch) => {
    b.add({ op: 'add', table: { family: 'ip', name: 't', comment: 'x' } });
    for (let i = 0; i < 300; i++) {
      b.add({ op: 'add', chain: { family: 'ip', table: 't', name: `c${i}`, hook: 'input', type: 'filter', priority: -i } });
      b.add({ op: 'add', rule: { family: 'ip', table: 't', chain: `c${i}`, comment: `r${i}`, exprs: [
        { type: 'payload', base: 'network', offset: 16, len: 4, dreg: 1 }, { type: 'cmp', sreg: 1, op: 'eq', data: ipv4('1.2.3.4') },
        { type: 'ct', key: 'state', dreg: 1, dir: 'original' }, { type: 'log', prefix: 'p', group: 2 }, { type: 'counter' },
        { type: 'verdict', verdict: { jump: `c${i}` } }] } });
      b.add({ op: 'add', elements: { family: 'ip', table: 't', set: 's', elements: [
        { key: port(i), comment: 'odd' }, { key: proto(6), data: ipv4('1.1.1.1'), timeout: 5 }] } });
    }
    return Buffer.from(b.finish());
  };
  expect(fill(new NftBatch(16)).equals(fill(new NftBatch(1 << 22)))).toBe(true);
});
