// Every command of `kpng` and every flag of its own, declared once: parsing (node:util parseArgs),
// the check that a flag belongs to the command, and each `--help` text are made from these tables.
// Backends declare their flags in the backend registry; kube-proxy's flags have their own table
// (kube-proxy-flag-table.ts), read when kpng runs with kube-proxy's command line.
import os from 'node:os';
import { JIT_CPU_SHARE, JIT_OBJECTS } from '../util/jit';
import { DEBUG_VERBOSITY } from '../util/log';

/** Flags shown and accepted together. */
export type FlagGroup = 'file' | 'kube' | 'local' | 'general' | 'model' | 'kernel' | 'serve' | 'tls' | 'publish' | 'aggregator';

export interface FlagSpec {
  name: string;
  type: 'string' | 'boolean';
  /** Repeatable (string flags): the value is a list. */
  multiple?: boolean;
  short?: string;
  /** Shown after the flag in --help (string flags), e.g. FILE. */
  placeholder?: string;
  group: FlagGroup;
  help: string;
}

export const GROUP_TITLES: Record<FlagGroup, string> = {
  file: 'the file source',
  kube: 'the kube source',
  local: 'the local source (another kpng\'s ENLS)',
  general: 'general',
  model: 'the model (these change the ENLS every backend renders)',
  kernel: 'kernel backends (nft, ipvs, ebpf)',
  serve: '--to api (serve every node\'s state over gRPC)',
  tls: 'TLS (--to api on tcp://, kpng local to a tcp:// server)',
  publish: 'kpng publish',
  aggregator: 'the aggregator',
};

export const FLAGS: FlagSpec[] = [
  { name: 'input', short: 'i', type: 'string', placeholder: 'FILE', group: 'file', help: 'what `kubectl get nodes,services,endpointslices -A -o yaml` (or -o json) prints: a List or a multi-document YAML stream; reloaded when rewritten or replaced' },
  { name: 'kubeconfig', type: 'string', placeholder: 'PATH', group: 'kube', help: 'the kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account)' },
  { name: 'kube-api-content-type', type: 'string', placeholder: 'TYPE', group: 'kube', help: 'application/vnd.kubernetes.protobuf (default, as kube-proxy: half the bytes of JSON) or application/json; the server may answer JSON either way' },
  { name: 'api', type: 'string', placeholder: 'URL', group: 'local', help: 'the server to read from: unix:///run/kpng/kpng.sock or tcp://HOST:PORT' },

  { name: 'node', type: 'string', placeholder: 'NAME', group: 'general', help: `the node whose state is computed (default: this host's name, ${os.hostname()})` },
  { name: 'hostname-override', type: 'string', placeholder: 'NAME', group: 'general', help: 'the same as --node (kube-proxy\'s name for it)' },
  { name: 'to', type: 'string', placeholder: 'BACKEND', group: 'general', help: 'where the state goes: a backend below, or api (default routes)' },
  { name: 'format', type: 'string', placeholder: 'FMT', group: 'general', help: 'routes: table (default) or jsonl, one object per service port: {"service":"ns/name","protocol":"TCP","port":80,"internal":["10.0.0.1:8080"],"external":[]}; dump: json (default) or yaml' },
  { name: 'once', type: 'boolean', group: 'general', help: 'compute, emit one sync and exit (kpng local: exit 1 if the server cannot be reached after 5 attempts, ~6 s)' },
  { name: 'stats', type: 'boolean', group: 'general', help: 'print "stats: time events rev usr-cpu sys-cpu tot-cpu mem revs/events" on stderr once a second (ms, counts, CPU ms in the interval, % of one core, MiB of resident memory, % of events that changed the state)' },
  { name: 'min-sync-period', type: 'string', placeholder: 'D', group: 'general', help: 'minimum time between two syncs of the backend, e.g. 1s, 250ms, 1m30s, 0 (default 1s)' },
  { name: 'min-change-period', type: 'string', placeholder: 'D', group: 'general', help: 'minimum time between two syncs of changes only, apart from full syncs (default: --min-sync-period); 0s: each change as soon as the sync before it ends, changes arriving meanwhile together' },
  { name: 'sync-burst', type: 'string', placeholder: 'N', group: 'general', help: 'syncs allowed back to back before the minimum period applies (default 2)' },
  { name: 'service-proxy-name', type: 'string', placeholder: 'NAME', group: 'general', help: 'also proxy services labelled service.kubernetes.io/service-proxy-name=NAME (services with another name are always left alone)' },
  { name: 'log-level', type: 'string', placeholder: 'LEVEL', group: 'general', help: 'debug | info | warn | error (default info); logs go to stderr' },
  { name: 'logging-format', type: 'string', placeholder: 'FMT', group: 'general', help: 'text (klog\'s lines, default) or json (one object a line, as kube-proxy\'s JSON logger writes them)' },
  { name: 'vmodule', type: 'string', placeholder: 'PATTERN=N,...', group: 'general', help: `klog's per-file verbosity, accepted for kube-proxy's command lines: kpng has no source files to match, so the highest N applies to every message (${DEBUG_VERBOSITY} and more: debug) unless --log-level is given` },
  { name: 'jit', type: 'string', placeholder: 'adaptive|on', group: 'general', help: `V8's optimizing compilers: adaptive (default) runs Maglev on the hottest code only until the first sync is done, Maglev alone after it, and both once the cluster has ${JIT_OBJECTS} Services + EndpointSlices or kpng uses ${JIT_CPU_SHARE * 100}% of a core for 30 s; on: both from the start (--to api always runs with them)` },
  { name: 'plugin', type: 'string', multiple: true, placeholder: 'MODULE', group: 'general', help: 'load a module that registers more backends (repeatable; see examples/)' },
  { name: 'cleanup-only', type: 'string', placeholder: 'kpng|kube-proxy', group: 'general', help: 'with --cleanup: remove only kpng\'s rules (migrating back to kube-proxy) or only kube-proxy\'s (default: both)' },

  { name: 'detect-local-mode', type: 'string', placeholder: 'MODE', group: 'model', help: 'how pod traffic is told apart (pods are not masqueraded to cluster IPs and are short-circuited to externalTrafficPolicy Local services): ClusterCIDR, sources in --cluster-cidr (default); NodeCIDR, sources in this Node\'s spec.podCIDRs; BridgeInterface, packets in on --pod-bridge-interface; InterfaceNamePrefix, on interfaces named --pod-interface-name-prefix*' },
  { name: 'cluster-cidr', type: 'string', multiple: true, placeholder: 'CIDR', group: 'model', help: 'the pod network, one CIDR or a dual-stack pair (repeatable or comma separated; ClusterCIDR mode only); without it pods are clients like any other' },
  { name: 'pod-bridge-interface', type: 'string', placeholder: 'NAME', group: 'model', help: 'the bridge pods\' packets arrive on (BridgeInterface mode)' },
  { name: 'pod-interface-name-prefix', type: 'string', placeholder: 'PREFIX', group: 'model', help: 'the prefix of the interfaces pods\' packets arrive on (InterfaceNamePrefix mode)' },
  { name: 'masquerade-all', type: 'boolean', group: 'model', help: 'masquerade all traffic to cluster IPs' },
  { name: 'nodeport-addresses', type: 'string', multiple: true, placeholder: 'primary|localhost|all|CIDR,...', group: 'model', help: 'where node ports answer: this node\'s addresses inside the CIDRs; primary (the default): the node\'s primary addresses; all: 0.0.0.0/0 and ::/0; localhost: 127.0.0.0/8 and ::1/128, served only with --localhost-nodeports (IPv4). A family without any answers on every address' },
  { name: 'localhost-nodeports', type: 'boolean', group: 'model', help: 'IPv4 node ports also answer on 127.0.0.1 when --nodeport-addresses takes it in (all, localhost or a CIDR holding it), as kube-proxy\'s iptables mode: sets route_localnet=1, masquerades those connections and drops other packets to 127.0.0.0/8 not already tracked (nft backend)' },
  { name: 'bind-address', type: 'string', placeholder: 'IP', group: 'model', help: 'this node\'s primary address of its family, instead of the Node object\'s (0.0.0.0 or ::, the default: the Node object\'s)' },

  { name: 'sync-period', type: 'string', placeholder: 'D', group: 'kernel', help: 'full resync period; also repairs rules edited behind kpng\'s back (default 1h)' },

  { name: 'listen', type: 'string', placeholder: 'URL', group: 'serve', help: 'unix:///run/kpng/kpng.sock (default; mode 0600) or tcp://HOST:PORT (needs --tls-cert and --tls-key; client certificates are verified with --tls-ca)' },
  { name: 'socket-group', type: 'string', placeholder: 'GROUP', group: 'serve', help: 'make the unix socket 0660 and owned by GROUP' },
  { name: 'tls-cert', type: 'string', placeholder: 'FILE', group: 'tls', help: 'this side\'s certificate (PEM)' },
  { name: 'tls-key', type: 'string', placeholder: 'FILE', group: 'tls', help: 'its private key (PEM)' },
  { name: 'tls-ca', type: 'string', placeholder: 'FILE', group: 'tls', help: 'the CA that signs the other side\'s certificate (PEM)' },

  { name: 'producer', type: 'string', placeholder: 'NAME', group: 'publish', help: 'the producer\'s name: its tables are its own, replaced as a whole by each document it publishes' },
  { name: 'file', type: 'string', placeholder: 'OBJECTS.yaml', group: 'publish', help: 'the nftables objects to publish (docs/aggregator.md); followed as it changes' },
  { name: 'once', type: 'boolean', group: 'publish', help: 'publish, wait until the objects are in the kernel, exit (1 when refused)' },
  { name: 'aggregator', type: 'string', placeholder: 'URL', group: 'aggregator', help: 'the aggregator\'s socket (default unix:///run/kpng/aggregator.sock)' },
];

/** `--help` and `--version`, accepted by every command. */
export const COMMON_FLAGS: FlagSpec[] = [
  { name: 'help', short: 'h', type: 'boolean', group: 'general', help: 'this text' },
  { name: 'version', type: 'boolean', group: 'general', help: 'kpng\'s version' },
];

export interface CommandSpec {
  name: string;
  /** One line per form, without "kpng ". */
  usage: string[];
  summary: string;
  /** Said after the usage in the command's --help. */
  about?: string;
  groups: FlagGroup[];
  /** Takes --to and the registered backends' flags. */
  backends: boolean;
  /** Positional arguments after the command: the most accepted. */
  positionals?: number;
}

export const COMMANDS: CommandSpec[] = [
  { name: 'file', usage: ['file  --input FILE [--node NAME] [--to BACKEND] [flags]'], summary: 'read a kubectl dump, follow its changes',
    about: 'FILE holds Nodes, Services and EndpointSlices as `kubectl get -o yaml|json` prints them; kpng reloads it when it is rewritten or replaced (renamed over), without restarting.',
    groups: ['file', 'general', 'model', 'kernel', 'serve', 'tls'], backends: true },
  { name: 'kube', usage: ['kube  [--kubeconfig PATH] [--node NAME] [--to BACKEND] [flags]'], summary: 'watch an API server',
    about: 'Services, EndpointSlices (discovery.k8s.io/v1) and this node\'s Node object from the API server. Run with kube-proxy\'s command line instead (no command), kpng runs this with the backend of --proxy-mode: `kpng help kube-proxy`.',
    groups: ['kube', 'general', 'model', 'kernel', 'serve', 'tls'], backends: true },
  { name: 'local', usage: ['local --api URL --node NAME [--to BACKEND] [flags]'], summary: 'consume the ENLS another kpng serves (--to api)',
    about: 'The state was computed by the server (its model flags apply there); this process only programs it.',
    groups: ['local', 'tls', 'general', 'kernel'], backends: true },
  { name: 'publish', usage: ['publish --producer NAME --file OBJECTS.yaml [--aggregator URL] [--once]'], summary: 'hand nftables objects to the node\'s aggregator',
    about: 'For a kpng running --to nft|ebpf|ipvs --aggregator --aggregator-listen URL. The objects are published, then followed as the file changes (a bad version is reported and the previous objects stay in the kernel); --once: publish, wait for the kernel, exit.',
    groups: ['publish', 'aggregator'], backends: false, positionals: 1 },
  { name: 'aggregator', usage: ['aggregator remove PRODUCER [--aggregator URL]', 'aggregator status [--aggregator URL]'], summary: 'remove a producer and its tables, or show what each producer owns',
    groups: ['aggregator'], backends: false, positionals: 2 },
  { name: 'migrate-check', usage: ['migrate-check [kube-proxy\'s flags, e.g. --config /var/lib/kube-proxy/config.conf]'], summary: 'say what moving this node from kube-proxy to kpng changes, before the switch',
    about: 'Reads what kube-proxy left on this node (nftables tables, iptables-nft and iptables-legacy chains, IPVS services, route_localnet, ports 10249 and 10256) without changing anything, and compares it with what kpng runs for the same command line or configuration file. Exit status: 0 when nothing a workload can notice changes, 1 when something does (listed). Run it where kube-proxy runs: on the node, in its network namespace (hostNetwork: true).',
    groups: ['general', 'model', 'kernel'], backends: true },
  { name: 'help', usage: ['help [COMMAND | kube-proxy]'], summary: 'this text, a command\'s, or kube-proxy\'s flags as kpng reads them', groups: [], backends: false, positionals: 1 },
  { name: 'version', usage: ['version'], summary: 'kpng\'s version', groups: [], backends: false },
];

export const commandSpec = (name: string): CommandSpec | undefined => COMMANDS.find((c) => c.name === name);

/** The flags a command accepts (without --help/--version and backend flags). */
export function commandFlags(cmd: CommandSpec): FlagSpec[] {
  return FLAGS.filter((f) => cmd.groups.includes(f.group));
}

/** The command a flag belongs to, for "--input applies to kpng file" errors. */
export function commandsOf(flag: string): string[] {
  return COMMANDS.filter((c) => commandFlags(c).some((f) => f.name === flag)).map((c) => c.name);
}
