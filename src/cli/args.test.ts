// parseCli() hands the model's flags to modelOptions() and turns its errors into usage errors.
import { registerBuiltinBackends } from '../backend/builtin';
import { parseCli, UsageError } from './args';

beforeAll(() => registerBuiltinBackends());

test('--detect-local-mode, its interface flags, --bind-address and --nodeport-addresses keywords reach the model', () => {
  const o = parseCli(['file', '--input', 's.yaml', '--detect-local-mode', 'InterfaceNamePrefix', '--pod-interface-name-prefix', 'veth',
    '--bind-address', '10.0.0.5', '--nodeport-addresses', 'localhost,primary', '--nodeport-addresses', '10.1.0.0/16']);
  expect(o.model).toMatchObject({
    detectLocalMode: 'InterfaceNamePrefix', podInterfaceNamePrefix: 'veth', podBridgeInterface: '', bindAddress: '10.0.0.5',
    nodePortAddresses: ['localhost', 'primary', '10.1.0.0/16'],
  });
  expect(parseCli(['file', '--input', 's.yaml', '--detect-local-mode=BridgeInterface', '--pod-bridge-interface=cni0']).model)
    .toMatchObject({ detectLocalMode: 'BridgeInterface', podBridgeInterface: 'cni0' });
  expect(parseCli(['file', '--input', 's.yaml', '--detect-local-mode', 'NodeCIDR']).model.detectLocalMode).toBe('NodeCIDR');
});

test('a bad value is a usage error naming the flag', () => {
  expect(() => parseCli(['file', '--input', 's.yaml', '--detect-local-mode', 'Foo'])).toThrow(UsageError);
  expect(() => parseCli(['file', '--input', 's.yaml', '--bind-address', 'nowhere'])).toThrow(/^--bind-address "nowhere": not an IP address$/);
});
