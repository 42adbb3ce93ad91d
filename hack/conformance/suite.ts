// What `make conformance` (hack/conformance/run.sh) runs of upstream's e2e suite, and how it reads the
// results: the default focus, the default skips (each with its reason), the summary line and the
// table that compares proxies test by test.
//
//   node dist/hack/conformance/suite.js focus [--family F] [--profile P]    the --ginkgo.focus
//   node dist/hack/conformance/suite.js skip [EXTRA_RE] [--family F] [--profile P]   the --ginkgo.skip (| EXTRA_RE)
//   node dist/hack/conformance/suite.js skips [--family F] [--profile P]    the skips with their reasons
//   (F: the cluster's IP family, ipv4 (default), ipv6 or dual: hack/cluster/up.sh --family;
//    P: default, or wide: every sig-network test that touches a service proxy, [Slow] and [Serial] included)
//   node dist/hack/conformance/suite.js summary REPORT.json   "N passed, M failed, K skipped"
//   node dist/hack/conformance/suite.js table NAME=REPORT.json...   a Markdown table, a column per run
import * as fs from 'node:fs';

/**
 * sig-network's Services tests (the "Services" describe and the Services part of the granular
 * networking checks: pod, node and endpoint to service, over TCP, UDP and SCTP), and every sig-network
 * test in the conformance profile.
 */
export const DEFAULT_FOCUS = String.raw`\[sig-network\] Services|\[sig-network\] Networking Granular Checks: Services|\[sig-network\].*\[Conformance\]`;

/**
 * The wide profile: the default focus, plus sig-network's tests that exercise the service proxy from
 * elsewhere in the suite: Conntrack (stale UDP entries, CLOSE_WAIT), KubeProxy, the Networking tests,
 * DNS (service names resolved through the proxy to CoreDNS), HostPort and EndpointSlice (the
 * controllers' slices the proxy reads), with their [Slow] and [Serial] tests.
 */
export const WIDE_FOCUS = String.raw`${DEFAULT_FOCUS}|\[sig-network\] (Conntrack|KubeProxy|Networking|DNS|HostPort|EndpointSlice)`;

export type Profile = 'default' | 'wide';
export const PROFILES: readonly Profile[] = ['default', 'wide'];

/** Skips the wide profile runs anyway: the slow tests and those that must run alone (ginkgo runs them last, one at a time). */
const WIDE_RUNS = new Set([String.raw`\[Serial\]`, String.raw`\[Slow\]`]);

function checkProfile(profile: string): Profile {
  if (!(PROFILES as readonly string[]).includes(profile)) throw new Error(`profile: ${profile} is not one of ${PROFILES.join(', ')}`);
  return profile as Profile;
}

export interface Skip {
  pattern: string;
  reason: string;
}

/** Tests the local cluster cannot run, whatever the proxy. Every one says why. */
export const DEFAULT_SKIPS: Skip[] = [
  { pattern: String.raw`\[Serial\]`, reason: 'runs alone and changes the whole cluster; the suite runs the rest in parallel' },
  { pattern: String.raw`\[Disruptive\]`, reason: 'restarts or breaks nodes and control-plane components' },
  { pattern: String.raw`\[Feature:[^\]]+\]|\[FeatureGate:[^\]]+\]\s*\[(Alpha|Beta)\]`, reason: 'needs a feature or feature gate the cluster does not enable' },
  { pattern: String.raw`LoadBalancer`, reason: 'needs a cloud provider to provision load balancers' },
  { pattern: String.raw`\[Flaky\]`, reason: 'marked flaky upstream' },
  { pattern: String.raw`GCE|\[Provider:`, reason: 'needs a specific cloud provider' },
  { pattern: String.raw`ExternalIP`, reason: 'needs addresses routed to the nodes from outside the cluster' },
  { pattern: String.raw`\[Slow\]`, reason: 'minutes each; run them with --focus' },
  {
    pattern: String.raw`should be rejected for evicted pods`,
    reason: "needs the kubelet to evict a pod over its ephemeral-storage limit; cAdvisor cannot measure this machine's root filesystem, so the local cluster's kubelets run without eviction",
  },
];

export type Family = 'ipv4' | 'ipv6' | 'dual';
export const FAMILIES: readonly Family[] = ['ipv4', 'ipv6', 'dual'];

function checkFamily(family: string): Family {
  if (!(FAMILIES as readonly string[]).includes(family)) throw new Error(`family: ${family} is not one of ${FAMILIES.join(', ')}`);
  return family as Family;
}

/** Upstream's dual-stack tests (test/e2e/network/dual_stack.go): the tag of every one of them. */
export const DUAL_STACK_FEATURE = 'IPv6DualStack';

/**
 * The default focus on a cluster of the family: on a dual-stack cluster, also upstream's dual-stack
 * tests, as upstream's dual-stack jobs add them.
 */
export function familyFocus(family: Family = 'ipv4', profile: Profile = 'default'): string {
  checkFamily(family);
  const base = checkProfile(profile) === 'wide' ? WIDE_FOCUS : DEFAULT_FOCUS;
  return family === 'dual' ? `${base}|\\[Feature:${DUAL_STACK_FEATURE}\\]` : base;
}

const reEscape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * A pattern (RE2: ginkgo's, no look-ahead) for every [Feature:NAME] tag but [Feature:<except>]: a name
 * that differs from it at some character, stops short of it, or goes on past it.
 */
export function featureTagExcept(except: string): string {
  const alts: string[] = [];
  for (let k = 0; k < except.length; k++) {
    const c = except[k] === ']' ? '' : reEscape(except[k]);
    alts.push(`${reEscape(except.slice(0, k))}[^\\]${c}][^\\]]*`);
    if (k > 0) alts.push(reEscape(except.slice(0, k)));
  }
  alts.push(`${reEscape(except)}[^\\]]+`);
  return `\\[Feature:(?:${alts.join('|')})\\]`;
}

/**
 * The default skips on a cluster of the family, as upstream's IPv6 and dual-stack jobs filter: tests of
 * a family the cluster lacks are skipped, and on a dual-stack cluster the feature skip spares the
 * dual-stack tests. (e2e.test itself takes the cluster's primary family from the `kubernetes`
 * Service's address.) ipv4: DEFAULT_SKIPS unchanged.
 */
export function familySkips(family: Family = 'ipv4', profile: Profile = 'default'): Skip[] {
  checkFamily(family);
  const base = checkProfile(profile) === 'wide' ? DEFAULT_SKIPS.filter((s) => !WIDE_RUNS.has(s.pattern)) : DEFAULT_SKIPS;
  if (family === 'ipv4') return base;
  const feature = DEFAULT_SKIPS[2];
  const skips = base.map((s) => (s === feature && family === 'dual'
    ? { pattern: `${featureTagExcept(DUAL_STACK_FEATURE)}|\\[FeatureGate:[^\\]]+\\]\\s*\\[(Alpha|Beta)\\]`, reason: `${s.reason} (but [Feature:${DUAL_STACK_FEATURE}]: the cluster is dual-stack)` }
    : s));
  if (family === 'ipv6') {
    skips.push({ pattern: String.raw`\[Feature:Networking-IPv4\]`, reason: 'IPv4 only: the cluster has no IPv4' });
    skips.push({ pattern: String.raw`\[Feature:IPv6DualStack\]`, reason: 'needs a dual-stack cluster' });
  }
  return skips;
}

export function skipRegex(extra?: string, family: Family = 'ipv4', profile: Profile = 'default'): string {
  const parts = familySkips(family, profile).map((s) => s.pattern);
  if (extra) parts.push(extra);
  return parts.join('|');
}

export type Outcome = 'passed' | 'failed' | 'skipped';

export interface SpecResult {
  name: string;
  outcome: Outcome;
  /** Why it failed or skipped itself (the first line of ginkgo's message). */
  message?: string;
  seconds: number;
}

interface GinkgoSpec {
  ContainerHierarchyTexts?: string[] | null;
  LeafNodeText?: string;
  LeafNodeType?: string;
  LeafNodeLabels?: string[] | null;
  State?: string;
  RunTime?: number;
  Failure?: { Message?: string };
}

/**
 * The specs of a ginkgo JSON report (--ginkgo.json-report) that were selected to run. Specs left out by
 * the focus and skip filters are in the report as "skipped" with no run time and no message: they are
 * not part of the run. A spec that skipped itself (Skip(): too few nodes, a missing feature) has a
 * message and counts as skipped.
 */
export function readReport(json: string): SpecResult[] {
  const suites = JSON.parse(json) as { SpecReports?: GinkgoSpec[] | null }[];
  const out: SpecResult[] = [];
  for (const suite of suites) {
    for (const s of suite.SpecReports ?? []) {
      if (s.LeafNodeType !== 'It') continue;
      const name = [...(s.ContainerHierarchyTexts ?? []), s.LeafNodeText ?? ''].join(' ').trim();
      const message = s.Failure?.Message?.split('\n')[0]?.trim() || undefined;
      const seconds = (s.RunTime ?? 0) / 1e9;
      let outcome: Outcome;
      if (s.State === 'passed') outcome = 'passed';
      else if (s.State === 'skipped' || s.State === 'pending') {
        if (!message && seconds === 0) continue;
        outcome = 'skipped';
      } else outcome = 'failed'; // failed, panicked, interrupted, aborted, timedout
      out.push({ name, outcome, message, seconds });
    }
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

export function summaryLine(specs: SpecResult[]): string {
  const n = (o: Outcome) => specs.filter((s) => s.outcome === o).length;
  return `${n('passed')} passed, ${n('failed')} failed, ${n('skipped')} skipped`;
}

/** A Markdown table: one row per test that any run selected, one column per run. */
export function comparisonTable(runs: { name: string; specs: SpecResult[] }[]): string {
  const names = [...new Set(runs.flatMap((r) => r.specs.map((s) => s.name)))].sort();
  const cell = (r: { specs: SpecResult[] }, name: string) => r.specs.find((s) => s.name === name)?.outcome ?? '-';
  const esc = (s: string) => s.replace(/\|/g, '\\|');
  const lines = [`| test | ${runs.map((r) => r.name).join(' | ')} |`, `|---|${runs.map(() => '---').join('|')}|`];
  for (const name of names) lines.push(`| ${esc(name)} | ${runs.map((r) => cell(r, name)).join(' | ')} |`);
  lines.push(`| **total** | ${runs.map((r) => summaryLine(r.specs)).join(' | ')} |`);
  return `${lines.join('\n')}\n`;
}

function main(argv: string[]): number {
  const [cmd, ...args] = argv;
  let family: Family = 'ipv4';
  let profile: Profile = 'default';
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--family') family = checkFamily(args[++i] ?? '');
    else if (args[i] === '--profile') profile = checkProfile(args[++i] ?? '');
    else rest.push(args[i]);
  }
  switch (cmd) {
    case 'focus':
      process.stdout.write(`${familyFocus(family, profile)}\n`);
      return 0;
    case 'skip':
      process.stdout.write(`${skipRegex(rest[0], family, profile)}\n`);
      return 0;
    case 'skips':
      for (const s of familySkips(family, profile)) process.stdout.write(`${s.pattern}\t${s.reason}\n`);
      return 0;
    case 'summary':
      if (rest.length !== 1) break;
      process.stdout.write(`${summaryLine(readReport(fs.readFileSync(rest[0], 'utf8')))}\n`);
      return 0;
    case 'failures':
      if (rest.length !== 1) break;
      for (const s of readReport(fs.readFileSync(rest[0], 'utf8')).filter((x) => x.outcome !== 'passed')) {
        process.stdout.write(`${s.outcome}: ${s.name}${s.message ? `\n    ${s.message}` : ''}\n`);
      }
      return 0;
    case 'table': {
      if (rest.length === 0) break;
      const runs = rest.map((a) => {
        const i = a.indexOf('=');
        if (i <= 0) throw new Error(`table: ${a} is not NAME=REPORT.json`);
        return { name: a.slice(0, i), specs: readReport(fs.readFileSync(a.slice(i + 1), 'utf8')) };
      });
      process.stdout.write(comparisonTable(runs));
      return 0;
    }
  }
  process.stderr.write('usage: suite.js focus | skip [EXTRA_RE] | skips [--family ipv4|ipv6|dual] [--profile default|wide] | summary REPORT.json | failures REPORT.json | table NAME=REPORT.json...\n');
  return 2;
}

if (require.main === module) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`suite: ${(e as Error).message}\n`);
    process.exitCode = 2;
  }
}
