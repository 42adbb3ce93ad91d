import { parse } from 'yaml';
import { ipv4, type NftOp } from '../native/nft-types';
import { parseObjects } from './objects';
import { applyOps, checkOps, type Ruleset } from '../nft/ruleset';

const DOC = `
tables:
  - family: ip
    name: denylist
    sets:
      - name: deny
        type: ipv4_addr
        elements: [192.168.50.100, 10.0.0.1]
      - name: svc
        type: [ipv4_addr, inet_proto, inet_service]
        data: verdict
        elements:
          - { key: [10.96.0.1, tcp, 80], verdict: accept }
    chains:
      - name: pre
        hook: prerouting
        type: filter
        priority: -300
        rules:
          - comment: deny-list
            exprs:
              - { type: payload, base: network, offset: 12, len: 4, dreg: 1 }
              - { type: lookup, sreg: 1, set: deny }
              - { type: cmp, sreg: 1, op: neq, data: 10.1.2.3 }
              - { type: counter }
              - { type: verdict, verdict: { jump: other } }
      - name: other
`;

describe('objects document', () => {
  test('builds tables, chains, sets with typed elements, then rules; the ops form a valid declaration', () => {
    const ops = parseObjects(parse(DOC));
    expect(ops.map((o) => `${o.op} ${Object.keys(o)[1]}`)).toEqual([
      'add table', 'add chain', 'add chain', 'add set', 'add elements', 'add set', 'add elements', 'add rule',
    ]);
    const pre = (ops[1] as Extract<NftOp, { chain: unknown }>).chain;
    expect(pre).toMatchObject({ hook: 'prerouting', type: 'filter', priority: -300, policy: 'accept' });
    const deny = (ops[4] as Extract<NftOp, { elements: unknown }>).elements.elements;
    expect(deny[0].key).toEqual(ipv4('192.168.50.100'));
    const vmap = (ops[6] as Extract<NftOp, { elements: unknown }>).elements.elements[0];
    expect(Buffer.from(vmap.key).toString('hex')).toBe('0a600001' + '06000000' + '00500000');
    expect(vmap.verdict).toBe('accept');
    const rule = (ops[7] as Extract<NftOp, { rule: unknown }>).rule;
    expect(rule.exprs[2]).toEqual({ type: 'cmp', sreg: 1, op: 'neq', data: ipv4('10.1.2.3') });
    const state: Ruleset = new Map();
    expect(checkOps(state, ops)).toBeUndefined();
    applyOps(state, ops);
    expect(state.get('ip denylist')!.sets.get('deny')!.elements.size).toBe(2);
  });

  test.each([
    ['tables: [{ family: ipx, name: t }]', /tables\[0\].family: "ipx" is not one of/],
    ['tables: [{ family: ip, name: t, sets: [{ name: s, type: ipv4_addr, elements: [300.1.1.1] }] }]', /tables\[0\].sets\[0\].elements\[0\]: bad IPv4 address/],
    ['tables: [{ family: ip, name: t, chains: [{ name: c, rules: [{ exprs: [{ type: bogus }] }] }] }]', /tables\[0\].chains\[0\].rules\[0\].exprs\[0\].type: unknown expression "bogus"/],
    ['tables: [{ family: ip, name: t, chains: [{ name: c, rules: [{ exprs: [{ type: cmp, sreg: 1, op: eq, data: zz }] }] }] }]', /exprs\[0\].data: expected an IP address or 0x/],
    ['tables: [{ family: ip, name: t, sets: [{ name: s, type: [ipv4_addr, inet_service], flags: [interval] }] }]', /sets\[0\].type: interval sets take one of/],
    ['tables: [{ family: ip, name: t, sets: [{ name: s, type: ipv4_addr, flags: [dynamic] }] }]', /flags\[0\]: "dynamic" is not one of interval/],
    ['tables: [{ family: ip, name: t, chains: [{ name: c, rules: [{ match: { dport: 22 }, exprs: [{ type: counter }] }] }] }]', /rules\[0\].match: a rule has either exprs/],
    ['tables: [{ family: ip, name: t, chains: [{ name: c, rules: [{ match: { saddr: "@nope" } }] }] }]', /chains\[0\].rules\[0\].match.saddr: no set "nope"/],
    ['rules: []', /rules: unknown field/],
  ])('refuses %s with the path of the problem', (doc, re) => {
    expect(() => parseObjects(parse(doc))).toThrow(re);
  });
});

test('the docs/aggregator.md example examples/aggregator/denylist.yaml is a valid declaration', () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const text = require('node:fs').readFileSync(require('node:path').join(__dirname, '../../examples/aggregator/denylist.yaml'), 'utf8') as string;
  const ops = parseObjects(parse(text));
  expect(checkOps(new Map(), ops)).toBeUndefined();
  expect(ops.filter((o) => 'rule' in o)).toHaveLength(2);
});
