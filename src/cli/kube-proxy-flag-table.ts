// Every flag of upstream kube-proxy v1.37 (its --help, plus the two deprecated port flags it still
// accepts), with where its value goes. `path` is the KubeProxyConfiguration field the flag sets, as
// upstream binds it; `when` says when upstream honours it:
//   always   - also with --config (not configuration, or a flag upstream applies over the file)
//   logging  - copied over the file's logging settings (flags win, as upstream's copyLogsFromFlags)
//   noConfig - only without --config (the file wins: upstream then ignores the flag)
import type { GoFlag } from './go-flags';

export interface KubeProxyFlag extends GoFlag {
  when: 'always' | 'logging' | 'noConfig';
  /** The configuration field; `{section}` is the proxy mode's section (iptables, ipvs or nftables). */
  path?: string;
  /** Placeholder and help text for `kpng --help`. */
  arg?: string;
  help: string;
  /** Why the flag has no effect in kpng (it is accepted, and named in the start-up warning when given). */
  noEffect?: string;
}

export const KUBE_PROXY_FLAGS: readonly KubeProxyFlag[] = [
  { name: 'config', type: 'string', when: 'always', arg: 'FILE', help: 'a KubeProxyConfiguration (or a ConfigMap holding one in config.conf); it wins over the flags of the same settings, as in kube-proxy' },
  { name: 'write-config-to', type: 'string', when: 'always', arg: 'FILE', help: 'write the configuration in effect (upstream\'s defaults and the flags) to FILE and exit' },
  { name: 'cleanup', type: 'bool', when: 'always', help: 'remove what kpng and kube-proxy programmed on this node (nftables, iptables chains, IPVS, BPF) and exit' },
  { name: 'init-only', type: 'bool', when: 'always', help: 'apply the settings that need full privileges (conntrack sysctls, oom_score_adj, IPVS strict ARP) and exit' },
  { name: 'master', type: 'string', when: 'always', arg: 'URL', help: 'the API server\'s address (overrides the kubeconfig\'s)' },
  { name: 'hostname-override', type: 'string', when: 'always', path: 'hostnameOverride', arg: 'NAME', help: 'this node\'s name (default: the host\'s name); wins over the file' },
  { name: 'help', short: 'h', type: 'bool', when: 'always', help: 'this text' },
  { name: 'version', type: 'version', when: 'always', help: 'print the version and exit (--version=raw: every build field)' },

  { name: 'v', short: 'v', type: 'int', when: 'logging', path: 'logging.verbosity', arg: 'N', help: 'log verbosity (4 and more: kpng\'s debug messages)' },
  { name: 'vmodule', type: 'string', when: 'logging', path: 'logging.vmodule', arg: 'PATTERN=N,...', help: 'per-file verbosity: kpng has no source files at run time, the highest N applies to every message' },
  { name: 'logging-format', type: 'string', when: 'logging', path: 'logging.format', arg: 'text|json', help: 'log format: klog\'s text (default) or JSON lines' },
  { name: 'log-flush-frequency', type: 'duration', when: 'logging', path: 'logging.flushFrequency', arg: 'D', help: 'no effect: kpng writes each line at once', noEffect: 'kpng writes each line at once' },
  { name: 'log-text-split-stream', type: 'bool', when: 'logging', path: 'logging.options.text.splitStream', help: 'no effect: kpng logs to stderr', noEffect: 'kpng logs to stderr' },
  { name: 'log-text-info-buffer-size', type: 'string', when: 'logging', path: 'logging.options.text.infoBufferSize', arg: 'Q', help: 'no effect: kpng logs to stderr', noEffect: 'kpng logs to stderr' },
  // Upstream lists these two only with the LoggingAlphaOptions gate, yet accepts them at their defaults without it.
  { name: 'log-json-split-stream', type: 'bool', when: 'logging', path: 'logging.options.json.splitStream', help: 'no effect: kpng logs to stderr', noEffect: 'kpng logs to stderr' },
  { name: 'log-json-info-buffer-size', type: 'string', when: 'logging', path: 'logging.options.json.infoBufferSize', arg: 'Q', help: 'no effect: kpng logs to stderr', noEffect: 'kpng logs to stderr' },

  { name: 'proxy-mode', type: 'string', when: 'noConfig', path: 'mode', arg: 'MODE', help: 'nftables, iptables or "" (both run kpng\'s nftables backend), ipvs, or a kpng backend (ebpf, ...)' },
  { name: 'kubeconfig', type: 'string', when: 'noConfig', path: 'clientConnection.kubeconfig', arg: 'FILE', help: 'kubeconfig of the API server (default: in-cluster, $KUBECONFIG, ~/.kube/config)' },
  { name: 'kube-api-content-type', type: 'string', when: 'noConfig', path: 'clientConnection.contentType', arg: 'TYPE', help: 'application/vnd.kubernetes.protobuf (default) or application/json' },
  { name: 'kube-api-qps', type: 'float', when: 'noConfig', path: 'clientConnection.qps', arg: 'N', help: 'requests per second to the API server (default 5; 0: no limit)' },
  { name: 'kube-api-burst', type: 'int', when: 'noConfig', path: 'clientConnection.burst', arg: 'N', help: 'requests allowed at once above the rate (default 10)' },
  { name: 'bind-address', type: 'string', when: 'noConfig', path: 'bindAddress', arg: 'IP', help: 'this node\'s primary IP (default 0.0.0.0: from the Node object)' },
  { name: 'healthz-bind-address', type: 'string', when: 'noConfig', path: 'healthzBindAddress', arg: 'IP:PORT', help: '/healthz and /livez (default 0.0.0.0:10256; empty disables)' },
  { name: 'metrics-bind-address', type: 'string', when: 'noConfig', path: 'metricsBindAddress', arg: 'IP:PORT', help: '/metrics, /proxyMode, /configz (default 127.0.0.1:10249; empty disables)' },
  { name: 'healthz-port', type: 'int', when: 'noConfig', help: 'deprecated: the port of --healthz-bind-address (0 disables)' },
  { name: 'metrics-port', type: 'int', when: 'noConfig', help: 'deprecated: the port of --metrics-bind-address (0 disables)' },
  { name: 'bind-address-hard-fail', type: 'bool', when: 'noConfig', path: 'bindAddressHardFail', help: 'exit when the metrics or healthz port cannot be bound' },
  // Repeatable in kpng (kube-proxy keeps the last one): the values are joined, comma separated.
  { name: 'cluster-cidr', type: 'strings', when: 'noConfig', path: 'clusterCIDR', arg: 'CIDR[,CIDR]', help: 'the pods\' network(s): sources inside are pods' },
  { name: 'detect-local-mode', type: 'string', when: 'noConfig', path: 'detectLocalMode', arg: 'MODE', help: 'how pod traffic is told: ClusterCIDR (default), NodeCIDR, BridgeInterface, InterfaceNamePrefix' },
  { name: 'pod-bridge-interface', type: 'string', when: 'noConfig', path: 'detectLocal.bridgeInterface', arg: 'NAME', help: 'with --detect-local-mode BridgeInterface' },
  { name: 'pod-interface-name-prefix', type: 'string', when: 'noConfig', path: 'detectLocal.interfaceNamePrefix', arg: 'PREFIX', help: 'with --detect-local-mode InterfaceNamePrefix' },
  { name: 'nodeport-addresses', type: 'strings', when: 'noConfig', path: 'nodePortAddresses', arg: 'LIST', help: 'where node ports answer: primary (default), all, CIDRs' },
  { name: 'masquerade-all', type: 'bool', when: 'noConfig', path: '{section}.masqueradeAll', help: 'masquerade all traffic to cluster IPs' },
  { name: 'oom-score-adj', type: 'int', when: 'noConfig', path: 'oomScoreAdj', arg: 'N', help: 'this process\'s oom_score_adj (default -999)' },
  { name: 'conntrack-max-per-core', type: 'int', when: 'noConfig', path: 'conntrack.maxPerCore', arg: 'N', help: 'nf_conntrack_max per CPU (default 32768; 0 leaves it)' },
  { name: 'conntrack-min', type: 'int', when: 'noConfig', path: 'conntrack.min', arg: 'N', help: 'nf_conntrack_max at least (default 131072)' },
  { name: 'conntrack-tcp-timeout-established', type: 'duration', when: 'noConfig', path: 'conntrack.tcpEstablishedTimeout', arg: 'D', help: 'default 24h0m0s; 0 leaves it' },
  { name: 'conntrack-tcp-timeout-close-wait', type: 'duration', when: 'noConfig', path: 'conntrack.tcpCloseWaitTimeout', arg: 'D', help: 'default 1h0m0s; 0 leaves it' },
  { name: 'conntrack-tcp-be-liberal', type: 'bool', when: 'noConfig', path: 'conntrack.tcpBeLiberal', help: 'nf_conntrack_tcp_be_liberal=1' },
  { name: 'conntrack-udp-timeout', type: 'duration', when: 'noConfig', path: 'conntrack.udpTimeout', arg: 'D', help: '0 (default) leaves it' },
  { name: 'conntrack-udp-timeout-stream', type: 'duration', when: 'noConfig', path: 'conntrack.udpStreamTimeout', arg: 'D', help: '0 (default) leaves it' },
  { name: 'iptables-sync-period', type: 'duration', when: 'noConfig', arg: 'D', help: 'kpng\'s full-resync period (modes other than ipvs)' },
  { name: 'iptables-min-sync-period', type: 'duration', when: 'noConfig', arg: 'D', help: 'minimum time between syncs (modes other than ipvs)' },
  { name: 'iptables-masquerade-bit', type: 'int', when: 'noConfig', path: 'iptables.masqueradeBit', arg: 'N', help: 'no effect: kpng marks packets its own way', noEffect: 'kpng marks packets its own way' },
  { name: 'iptables-localhost-nodeports', type: 'bool', when: 'noConfig', path: 'iptables.localhostNodePorts', help: 'modes iptables and "": node ports also answer on 127.0.0.1 (default true; sets route_localnet); other modes do not read it' },
  { name: 'ipvs-sync-period', type: 'duration', when: 'noConfig', arg: 'D', help: 'kpng\'s full-resync period (mode ipvs)' },
  { name: 'ipvs-min-sync-period', type: 'duration', when: 'noConfig', arg: 'D', help: 'minimum time between syncs (mode ipvs)' },
  { name: 'ipvs-scheduler', type: 'string', when: 'noConfig', path: 'ipvs.scheduler', arg: 'NAME', help: 'IPVS scheduler (mode ipvs; default rr)' },
  { name: 'ipvs-strict-arp', type: 'bool', when: 'noConfig', path: 'ipvs.strictARP', help: 'arp_ignore=1, arp_announce=2 (mode ipvs)' },
  { name: 'ipvs-exclude-cidrs', type: 'strings', when: 'noConfig', path: 'ipvs.excludeCIDRs', arg: 'CIDRS', help: 'IPVS services kpng never removes (mode ipvs, --cleanup)' },
  { name: 'ipvs-tcp-timeout', type: 'duration', when: 'noConfig', path: 'ipvs.tcpTimeout', arg: 'D', help: 'IPVS TCP idle timeout (mode ipvs; 0 leaves it)' },
  { name: 'ipvs-tcpfin-timeout', type: 'duration', when: 'noConfig', path: 'ipvs.tcpFinTimeout', arg: 'D', help: 'IPVS TCP FIN timeout (mode ipvs; 0 leaves it)' },
  { name: 'ipvs-udp-timeout', type: 'duration', when: 'noConfig', path: 'ipvs.udpTimeout', arg: 'D', help: 'IPVS UDP timeout (mode ipvs; 0 leaves it)' },
  { name: 'config-sync-period', type: 'duration', when: 'noConfig', path: 'configSyncPeriod', arg: 'D', help: 'no effect: kpng\'s watches do not resync', noEffect: 'kpng\'s watches do not resync' },
  { name: 'feature-gates', type: 'mapBool', when: 'noConfig', path: 'featureGates', arg: 'K=V,...', help: 'no effect: kpng has no feature gates', noEffect: 'kpng has no feature gates' },
  { name: 'profiling', type: 'bool', when: 'noConfig', path: 'enableProfiling', help: 'no effect: kpng serves no pprof handler', noEffect: 'kpng serves no pprof handler' },
  { name: 'show-hidden-metrics-for-version', type: 'string', when: 'noConfig', path: 'showHiddenMetricsForVersion', arg: 'V', help: 'no effect: kpng hides no metric', noEffect: 'kpng hides no metric' },
];
