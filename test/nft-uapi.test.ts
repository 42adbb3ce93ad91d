// The nftables numbers checked against the installed C headers (the kernel's uapi and libnftnl's), not
// against each other: the tests' listing decoder (test/helpers/nft-list.ts) reads its constants from
// the headers, and every constant the product's encoder uses must equal the header's. A wrong constant
// in src fails here, whatever the decoder says.
import { A, CMP_OP, CT_KEY, EXPR_ATTRS, HOOK, META_KEY, PAYLOAD_BASE, SET_F, VERDICT } from '../src/native/encode';
import {
  CT_STATE, IPPROTO, NFPROTO, NFT_REG_1, NFT_REG_2, NFT_REG_3, NFT_REG_4, NFT_REG32, NFT_REG_VERDICT, RTN,
} from '../src/native/nft-types';
import { evaluate, parseHeader, uapi, uapiEnum } from './helpers/nf-tables-uapi';
import { kernelEnums, LISTED_ATTRS, listedAttrIds } from './helpers/nft-list';

describe('the header reader', () => {
  test('enum members count on from the previous one; `= expr` sets the count; defines are read, in an enum too', () => {
    const h = parseHeader(`
      /* a comment with enum { X } inside */
      enum nft_x { NFT_A, NFT_B, NFT_C = 10, NFT_D, __NFT_MAX };
      #define NFT_E (1 << 4) /* trailing */
      #define NFT_F (NFT_E | NFT_B)
      #define NFT_FN(x) ((x) + 1)
      enum { NFT_G = -1, NFT_H = NFT_G - 1, NFT_I = NFT_D + NFT_C, NFT_J = 0x20U, NFT_K = ~0 & 0xff,
      #define NFT_K NFT_K
      #define NFT_ALIAS NFT_L
        NFT_L };
    `);
    expect(Object.fromEntries(h)).toEqual({
      NFT_A: 0, NFT_B: 1, NFT_C: 10, NFT_D: 11, __NFT_MAX: 12, NFT_E: 16, NFT_F: 17,
      NFT_G: -1, NFT_H: -2, NFT_I: 21, NFT_J: 32, NFT_K: 255, NFT_L: 256, NFT_ALIAS: 256,
    });
  });

  test('an expression it cannot read gives no value (and no guess)', () => {
    expect(evaluate('sizeof(struct x)', () => undefined)).toBeUndefined();
    expect(evaluate('UNKNOWN + 1', () => undefined)).toBeUndefined();
    expect(evaluate('(1 << 3) | 2', () => undefined)).toBe(10);
    expect(Object.fromEntries(parseHeader('enum { A = sizeof(int), B, C = 3, D };'))).toEqual({ C: 3, D: 4 });
  });

  test('reads the installed headers', () => {
    // Values the kernel's ABI fixed long ago: if these are wrong, the reader is.
    const names = ['NFT_CMP_EQ', 'NFT_CMP_GTE', 'NF_ACCEPT', 'NFT_RETURN', 'NFPROTO_IPV6', 'NFTNL_EXPR_PAYLOAD_DREG'];
    expect(names.map(uapi)).toEqual([0, 5, 1, -5, 10, 1]);
    expect(() => uapi('NFT_NO_SUCH_THING')).toThrow(/NFT_NO_SUCH_THING is not defined in .*nf_tables\.h/);
  });
});

describe("the listing decoder's constants", () => {
  test('every attribute it reads is named in libnftnl/expr.h, ids distinct per expression', () => {
    for (const [expr, fields] of Object.entries(listedAttrIds())) {
      const ids = Object.values(fields).map(([id]) => id);
      expect([expr, new Set(ids).size]).toEqual([expr, ids.length]);
      for (const [id] of Object.values(fields)) expect(id).toBeGreaterThanOrEqual(uapi('NFTNL_EXPR_BASE'));
    }
  });

  test('every kernel enum it decodes with is in the headers', () => {
    const k = kernelEnums();
    expect(k.verdict).toEqual({ drop: 0, accept: 1, continue: -1, break: -2, jump: -3, goto: -4, return: -5 });
    expect(Object.keys(k.metaKey)).toEqual(expect.arrayContaining(['l4proto', 'mark', 'iifname', 'nfproto']));
    expect(k.ctKey.packets).toBe(uapi('NFT_CT_PKTS'));
  });
});

describe("the product's encoder constants equal the headers'", () => {
  test('every expression attribute id (and its width) is libnftnl\'s', () => {
    const listed = listedAttrIds();
    for (const [expr, fields] of Object.entries(EXPR_ATTRS)) {
      for (const [field, [id, width]] of Object.entries(fields)) {
        const name = LISTED_ATTRS[expr]?.[field]?.[0] ?? 'no header name known (add it to LISTED_ATTRS in test/helpers/nft-list.ts)';
        const header = listed[expr]?.[field];
        expect(`${expr}.${field} = ${id} ${width} (${name})`).toBe(`${expr}.${field} = ${header?.[0]} ${header?.[1]} (${name})`);
      }
    }
  });

  test('libnftnl object attribute ids (tables, chains, sets, rules, flowtables)', () => {
    for (const [k, v] of Object.entries(A)) expect(`${k} = ${v}`).toBe(`${k} = ${uapi(`NFTNL_${k}`)}`);
  });

  test('kernel enums: comparison, payload base, meta and ct keys, verdicts, hooks, families', () => {
    const k = kernelEnums();
    expect(CMP_OP).toEqual(k.cmpOp);
    expect(PAYLOAD_BASE).toEqual(k.payloadBase);
    expect(VERDICT).toEqual(k.verdict);
    for (const [name, v] of Object.entries(META_KEY)) expect(`meta ${name} = ${v}`).toBe(`meta ${name} = ${k.metaKey[name]}`);
    for (const [name, v] of Object.entries(CT_KEY)) expect(`ct ${name} = ${v}`).toBe(`ct ${name} = ${k.ctKey[name]}`);
    expect(HOOK).toEqual({ ...k.hook, ingress: uapi('NF_NETDEV_INGRESS') });
    expect(NFPROTO).toEqual(k.family);
  });

  test('set flags, registers, ct state bits, route types, protocols', () => {
    expect(SET_F).toEqual({
      anonymous: uapi('NFT_SET_ANONYMOUS'), constant: uapi('NFT_SET_CONSTANT'), interval: uapi('NFT_SET_INTERVAL'),
      map: uapi('NFT_SET_MAP'),
      timeout: uapi('NFT_SET_TIMEOUT'), dynamic: uapi('NFT_SET_EVAL'), object: uapi('NFT_SET_OBJECT'), concat: uapi('NFT_SET_CONCAT'),
    });
    expect([NFT_REG_VERDICT, NFT_REG_1, NFT_REG_2, NFT_REG_3, NFT_REG_4, NFT_REG32(0), NFT_REG32(15)])
      .toEqual(['NFT_REG_VERDICT', 'NFT_REG_1', 'NFT_REG_2', 'NFT_REG_3', 'NFT_REG_4', 'NFT_REG32_00', 'NFT_REG32_15'].map(uapi));
    // NF_CT_STATE_BIT(ctinfo) is a function-like macro: (1 << ((ctinfo) % IP_CT_IS_REPLY + 1)).
    const stateBit = (ctinfo: string) => 1 << ((uapi(ctinfo) % uapi('IP_CT_IS_REPLY')) + 1);
    expect(CT_STATE).toEqual({
      invalid: uapi('NF_CT_STATE_INVALID_BIT'), established: stateBit('IP_CT_ESTABLISHED'), related: stateBit('IP_CT_RELATED'),
      new: stateBit('IP_CT_NEW'), untracked: uapi('NF_CT_STATE_UNTRACKED_BIT'),
    });
    const rtn = uapiEnum('RTN_');
    for (const [name, v] of Object.entries(RTN)) expect(`RTN ${name} = ${v}`).toBe(`RTN ${name} = ${rtn[name]}`);
    for (const [name, v] of Object.entries(IPPROTO)) {
      expect(`IPPROTO ${name} = ${v}`).toBe(`IPPROTO ${name} = ${uapi(`IPPROTO_${name.toUpperCase()}`)}`);
    }
  });
});
