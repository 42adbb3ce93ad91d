// kpng's logging flags as kube-proxy's command lines give them: --logging-format and --vmodule.
import { parseCli, vmoduleVerbosity } from '../src/cli/args';
import { registerBuiltinBackends } from '../src/backend/builtin';

beforeAll(() => registerBuiltinBackends());

test('--logging-format: text by default, json, anything else is a usage error', () => {
  expect(parseCli(['file', '--input', 'x.yaml']).logFormat).toBe('text');
  expect(parseCli(['file', '--input', 'x.yaml', '--logging-format', 'json']).logFormat).toBe('json');
  expect(() => parseCli(['file', '--input', 'x.yaml', '--logging-format=xml'])).toThrow(/--logging-format "xml": expected text or json/);
});

test('--vmodule acts globally: its highest verbosity, 4 and more meaning debug, unless --log-level says otherwise', () => {
  expect(vmoduleVerbosity(undefined)).toBe(0);
  expect(vmoduleVerbosity('proxier=2,nftables*=5')).toBe(5);
  expect(() => vmoduleVerbosity('proxier')).toThrow(/--vmodule "proxier": expected PATTERN=N/);
  expect(parseCli(['file', '--input', 'x.yaml', '--vmodule', 'proxier=2']).logLevel).toBe('info');
  expect(parseCli(['file', '--input', 'x.yaml', '--vmodule', 'proxier=2,nftables*=4']).logLevel).toBe('debug');
  expect(parseCli(['file', '--input', 'x.yaml', '--vmodule', 'proxier=6', '--log-level', 'warn']).logLevel).toBe('warn');
});
