// The IPVS / rtnetlink / sysctl entry points check their arguments before any kernel work (host test:
// no IPVS needed, the checks throw synchronously). Kernel behaviour is in ipvs.guest.test.ts.
import { loadNative } from './index';
import { encodeIpvsOps } from './ipvs';
import { ensureLink, sysctl } from './rtnl';
import { gated, need } from '../../test/helpers/gate';

const t = gated(need.native()).test;

t('malformed arguments are errors naming what was expected', () => {
  const addon = loadNative() as unknown as Record<string, (...a: unknown[]) => unknown>;
  expect(() => addon.ipvsApply(Buffer.alloc(10))).toThrow(/104-byte records/);
  expect(() => addon.ipvsApply(Buffer.alloc(0), 42)).toThrow(/netns: a path string/);
  expect(() => addon.ipvsDump('yes')).toThrow(/ipvsDump\(dests: boolean/);
  expect(() => addon.ipvsConfig(7)).toThrow(/ipvsConfig\(set/);
  expect(() => addon.rtnlLink(1)).toThrow(/rtnlLink\(name/);
  expect(() => addon.rtnlLink('x', { kind: 3 })).toThrow(/kind is a link kind/);
  expect(() => addon.rtnlAddrs('1')).toThrow(/rtnlAddrs\(ifindex/);
  expect(() => addon.rtnlAddrApply(Buffer.alloc(5))).toThrow(/24-byte records/);
  expect(() => addon.sysctl(['net/ipv4/ip_forward'])).toThrow(/\[name, value \| null\]/);
});

test('the TypeScript side refuses bad input before the addon sees it', async () => {
  expect(() => encodeIpvsOps([{ op: 'addService', service: { address: '10.0.0.1', protocol: 'icmp' as 'tcp', port: 1, scheduler: 'rr' } }])).toThrow(/protocol icmp/);
  expect(() => encodeIpvsOps([{ op: 'addDest', service: { address: '10.0.0.1', protocol: 'tcp', port: 1 }, dest: { address: '10.0.0.2', port: 1, weight: -1 } }])).toThrow(/bad weight -1/);
  expect(() => encodeIpvsOps([{ op: 'delService', service: { address: 'nope', protocol: 'tcp', port: 1 } }])).toThrow(/op #0/);
  await expect(ensureLink('a name with spaces')).rejects.toThrow(/bad interface name/);
  await expect(sysctl([['../../etc/passwd', 1]])).rejects.toThrow(/bad sysctl name/);
});
