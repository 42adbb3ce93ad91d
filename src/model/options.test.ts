// modelOptions(): kube-proxy's defaults and validation rules for the flags the model takes
// (pkg/proxy/apis/config/validation: validateDetectLocalMode, validateDetectLocalConfiguration,
// validateKubeProxyNodePortAddress, BindAddress), and the notes logged about them.
import { isLoopbackCIDR, modelNotes, modelOptions, OptionError } from './options';

const fails = (raw: Parameters<typeof modelOptions>[0]): string => {
  try {
    modelOptions(raw);
  } catch (e) {
    expect(e).toBeInstanceOf(OptionError);
    return (e as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(raw)}`);
};

describe('--detect-local-mode', () => {
  test('empty means ClusterCIDR; the four modes are accepted; anything else names the flag and the choices', () => {
    expect(modelOptions({}).detectLocalMode).toBe('ClusterCIDR');
    expect(modelOptions({ detectLocalMode: '' }).detectLocalMode).toBe('ClusterCIDR');
    expect(modelOptions({ detectLocalMode: 'NodeCIDR' }).detectLocalMode).toBe('NodeCIDR');
    expect(modelOptions({ detectLocalMode: 'BridgeInterface', podBridgeInterface: 'cni0' })).toMatchObject({ detectLocalMode: 'BridgeInterface', podBridgeInterface: 'cni0' });
    expect(modelOptions({ detectLocalMode: 'InterfaceNamePrefix', podInterfaceNamePrefix: 'veth' })).toMatchObject({ detectLocalMode: 'InterfaceNamePrefix', podInterfaceNamePrefix: 'veth' });
    expect(fails({ detectLocalMode: 'Foo' })).toBe('--detect-local-mode "Foo": expected ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix');
    // Case matters, as upstream's set lookup.
    expect(fails({ detectLocalMode: 'nodecidr' })).toMatch(/^--detect-local-mode "nodecidr"/);
  });
  test('the interface modes need their interface name; the other modes ignore it', () => {
    expect(fails({ detectLocalMode: 'BridgeInterface' })).toBe('--pod-bridge-interface: required with --detect-local-mode BridgeInterface');
    expect(fails({ detectLocalMode: 'InterfaceNamePrefix', podInterfaceNamePrefix: ' ' })).toBe('--pod-interface-name-prefix: required with --detect-local-mode InterfaceNamePrefix');
    // A name the kernel cannot have would match nothing: refused rather than silently useless.
    expect(fails({ detectLocalMode: 'BridgeInterface', podBridgeInterface: 'a-very-long-bridge0' })).toMatch(/^--pod-bridge-interface "a-very-long-bridge0": not an interface name/);
    expect(modelOptions({ detectLocalMode: 'NodeCIDR', podBridgeInterface: 'cni0', podInterfaceNamePrefix: 'veth' })).toMatchObject({ podBridgeInterface: '', podInterfaceNamePrefix: '' });
  });
  test('--cluster-cidr: one CIDR or a dual-stack pair in ClusterCIDR mode; not used (nor checked) in the others', () => {
    expect(modelOptions({ clusterCIDRs: ['10.244.0.0/16', 'FD00:244::/48'] }).clusterCIDRs).toEqual(['10.244.0.0/16', 'fd00:244::/48']);
    expect(fails({ clusterCIDRs: ['10.244.0.0/16', '10.245.0.0/16'] })).toMatch(/^--cluster-cidr "10.244.0.0\/16,10.245.0.0\/16": expected one CIDR or a dual-stack pair/);
    expect(fails({ clusterCIDRs: ['fd00::/64', 'fd01::/64'] })).toMatch(/dual-stack pair/);
    expect(fails({ clusterCIDRs: ['10.244.0.0/33'] })).toMatch(/^--cluster-cidr: "10.244.0.0\/33" is not a CIDR/);
    for (const detectLocalMode of ['NodeCIDR', 'BridgeInterface', 'InterfaceNamePrefix']) {
      expect(modelOptions({ detectLocalMode, podBridgeInterface: 'br0', podInterfaceNamePrefix: 'v', clusterCIDRs: ['junk'] }).clusterCIDRs).toEqual([]);
    }
  });
});

describe('--nodeport-addresses', () => {
  test('default primary; keywords and CIDRs in any combination, canonical, CIDRs de-duplicated', () => {
    expect(modelOptions({}).nodePortAddresses).toEqual(['primary']);
    expect(modelOptions({ nodePortAddresses: ['localhost', 'primary', '10.0.0.0/8', ' 10.0.0.0/8', 'FD00::/64', 'all'] }).nodePortAddresses)
      .toEqual(['localhost', 'primary', '10.0.0.0/8', 'fd00::/64', 'all']);
  });
  test('a keyword given twice, or something that is neither keyword nor CIDR, names the flag', () => {
    expect(fails({ nodePortAddresses: ['primary', 'primary'] })).toBe('--nodeport-addresses: "primary" is given twice');
    expect(fails({ nodePortAddresses: ['Primary'] })).toMatch(/^--nodeport-addresses: "Primary" is neither a CIDR nor one of the keywords primary, localhost, all/);
  });
});

describe('--bind-address', () => {
  test('an IP, canonical; empty, 0.0.0.0 and :: leave the primary address to the Node object', () => {
    expect(modelOptions({ bindAddress: '192.168.1.5' }).bindAddress).toBe('192.168.1.5');
    expect(modelOptions({ bindAddress: '2001:DB8:0::5' }).bindAddress).toBe('2001:db8::5');
    for (const bindAddress of ['', '0.0.0.0', '::']) expect(modelOptions({ bindAddress }).bindAddress).toBe('');
    expect(fails({ bindAddress: '192.168.1.0/24' })).toBe('--bind-address "192.168.1.0/24": not an IP address');
  });
});

describe('notes', () => {
  test('ClusterCIDR without a cluster CIDR, and loopback node-port addresses, are explained; a usual setup says nothing', () => {
    expect(modelNotes(modelOptions({}))).toEqual([{ level: 'debug', text: expect.stringMatching(/without --cluster-cidr: pods cannot be told apart/) }]);
    expect(modelNotes(modelOptions({ clusterCIDRs: ['10.0.0.0/8'], nodePortAddresses: ['localhost'] }))).toEqual([{ level: 'info', text: expect.stringMatching(/not served on loopback addresses/) }]);
    expect(modelNotes(modelOptions({ clusterCIDRs: ['10.0.0.0/8'], nodePortAddresses: ['127.0.0.0/16'] }))).toHaveLength(1);
    expect(modelNotes(modelOptions({ detectLocalMode: 'NodeCIDR', nodePortAddresses: ['primary', '0.0.0.0/0'] }))).toEqual([]);
  });
  test('loopback CIDRs: inside 127.0.0.0/8, or ::1/128', () => {
    expect(['127.0.0.0/8', '127.1.0.0/16', '::1/128'].map(isLoopbackCIDR)).toEqual([true, true, true]);
    expect(['0.0.0.0/0', '96.0.0.0/3', '::/0', '10.0.0.0/8'].map(isLoopbackCIDR)).toEqual([false, false, false, false]);
  });
});
