// Render the backend's ops as an `nft -f` script: the same ruleset the netlink path builds. Used by
// the benchmark (to compare with `nft -f`) and for debugging; product code never runs nft.
import { MASQ_BIT, SHARED_NAMES, type Elem, type IpFamily, type Op, type SetSpec, type Stmt, type Verdict } from './types';

const hex = (n: number): string => `0x${n.toString(16).padStart(8, '0')}`;
const a = (fam: IpFamily, addr: string): string => (fam === 'ip6' ? addr : addr);
const dnatAddr = (fam: IpFamily, addr: string, port: number): string => (fam === 'ip6' ? `[${addr}]:${port}` : `${addr}:${port}`);

/** `iifname "NAME"` or `iifname "PREFIX*"` (nft's wildcard: the name starts with PREFIX). */
const iifText = (name: string, prefix: boolean): string => `iifname "${name}${prefix ? '*' : ''}"`;

export function stmtText(fam: IpFamily, st: Stmt): string {
  const ct = (b?: boolean) => (b ? 'ct state new ' : '');
  switch (st.type) {
    case 'vmapVip': return `${ct(st.ctNew)}${fam} daddr . meta l4proto . th dport vmap @${st.map}`;
    case 'vmapPort': {
      const local = st.local ? 'fib daddr type local ' : '';
      const cidr = st.daddrCidr && !/\/0$/.test(st.daddrCidr) ? `${fam} daddr ${st.daddrCidr} ` : '';
      const notLoopback = st.local && (!st.daddrCidr || st.exceptLoopback) ? `${fam} daddr != ${fam === 'ip' ? '127.0.0.0/8' : '::1'} ` : '';
      const dst = cidr + notLoopback;
      return `${ct(st.ctNew)}${local}${dst}meta l4proto . th dport vmap @${st.map}`;
    }
    case 'jump': return `jump ${st.chain}`;
    case 'goto': return `goto ${st.chain}`;
    case 'srcCidr': return `${fam} saddr ${st.cidr} ${st.then === 'return' ? 'return' : `goto ${st.then.goto}`}`;
    case 'classGoto': {
      const from = st.from === 'local' ? 'fib saddr type local '
        : st.from === 'any' ? ''
          : 'iifname' in st.from ? `${iifText(st.from.iifname, st.from.prefix)} `
            : /\/0$/.test(st.from.cidr) ? '' : `${fam} saddr ${st.from.cidr} `;
      return `${from}${st.masq ? `meta mark set meta mark | ${hex(MASQ_BIT)} ` : ''}goto ${st.chain}`;
    }
    case 'iifReturn': return `${iifText(st.iifname, st.prefix)} return`;
    case 'rejectDaddrInSet': return `ct state new ${fam} daddr @${st.set} reject`;
    case 'dnatPick': return `meta l4proto ${st.proto} dnat ${fam} to ${st.key === 'vip' ? `${fam} daddr . ` : ''}meta l4proto . th dport . numgen random mod ${st.n} map @${st.map}`;
    case 'dnat': return `meta l4proto ${st.proto} dnat ${fam} to ${dnatAddr(fam, st.addr, st.port)}`;
    case 'affinityGoto': return `${fam} saddr @${st.set} goto ${st.chain}`;
    case 'randomGoto': return `numgen random mod ${st.mod} 0 goto ${st.chain}`;
    case 'affinityUpdate': return `update @${st.set} { ${fam} saddr }`;
    case 'drop': return 'drop';
    case 'rejectTcp': return 'meta l4proto tcp reject with tcp reset';
    case 'rejectIcmp': return fam === 'ip' ? 'reject with icmp type port-unreachable' : 'reject with icmpv6 type port-unreachable';
    case 'hairpinMasq': return `ct status dnat ${fam} saddr . ${fam} daddr @${SHARED_NAMES.hairpin} masquerade`;
    case 'localnetMasq': return 'ct status dnat ip saddr 127.0.0.0/8 masquerade fully-random';
    case 'dropLocalnet': return 'ip daddr 127.0.0.0/8 ip saddr != 127.0.0.0/8 ct state & (established | related) == 0 ct status & dnat == 0 drop';
    case 'returnIfNoMark': return `meta mark & ${hex(MASQ_BIT)} == 0 return`;
    case 'clearMark': return `meta mark set meta mark ^ ${hex(MASQ_BIT)}`;
    case 'masquerade': return 'masquerade fully-random';
    case 'flowOffload': return `ct status dnat ${st.minPackets > 0 ? `ct packets > ${st.minPackets} ` : ''}flow add @${st.flowtable}`;
  }
}

function setText(fam: IpFamily, s: SetSpec): string {
  const text = setBody(fam, s);
  return s.size !== undefined && s.kind !== 'affinity' ? text.replace(/; }$/, `; size ${s.size}; }`) : text;
}

function setBody(fam: IpFamily, s: SetSpec): string {
  const addr = fam === 'ip' ? 'ipv4_addr' : 'ipv6_addr';
  switch (s.kind) {
    case 'vipMap': return `map ${s.name} { type ${addr} . inet_proto . inet_service : verdict; }`;
    case 'portMap': return `map ${s.name} { type inet_proto . inet_service : verdict; }`;
    case 'pickVipMap': return `map ${s.name} { typeof ${fam} daddr . meta l4proto . th dport . numgen random mod 1 : ${fam} daddr . th dport; }`;
    case 'pickPortMap': return `map ${s.name} { typeof meta l4proto . th dport . numgen random mod 1 : ${fam} daddr . th dport; }`;
    case 'pairSet': return `set ${s.name} { type ${addr} . ${addr}; }`;
    case 'addrSet': return `set ${s.name} { type ${addr}; }`;
    case 'affinity': return `set ${s.name} { type ${addr}; flags dynamic,timeout; timeout ${s.timeoutSec ?? 10800}s; }`;
  }
}

const verd = (v: Verdict): string => (v === 'drop' ? 'drop' : `goto ${v.goto}`);

export function elemText(fam: IpFamily, e: Elem): string {
  switch (e.type) {
    case 'vip': return `${a(fam, e.addr)} . ${e.proto} . ${e.port} : ${verd(e.verdict)}`;
    case 'port': return `${e.proto} . ${e.port} : ${verd(e.verdict)}`;
    case 'pick': return `${e.addr !== undefined ? `${e.addr} . ` : ''}${e.proto} . ${e.port} . ${e.slot} : ${e.epAddr} . ${e.epPort}`;
    case 'pair': return `${e.addr} . ${e.addr}`;
    case 'addr': return e.addr;
  }
}

/** One family's ops as nft commands (one per line), for `nft -f`. */
export function toNftText(fam: IpFamily, table: string, ops: Op[]): string {
  const t = `${fam} ${table}`;
  const lines: string[] = [];
  for (const op of ops) {
    switch (op.kind) {
      case 'resetTable': lines.push(`add table ${t}`, `delete table ${t}`, `add table ${t}`); break;
      case 'addSet': lines.push(`add ${setText(fam, op.set).replace(/^(map|set) /, `$1 ${t} `)}`); break;
      case 'delSet': lines.push(`delete set ${t} ${op.name}`); break;
      case 'addTable': lines.push(`add table ${t}`); break;
      case 'flushSet': lines.push(`flush set ${t} ${op.name}`); break;
      case 'addChain': {
        const h = op.chain.hook;
        lines.push(`add chain ${t} ${op.chain.name}${h ? ` { type ${h.type} hook ${h.hook} priority ${h.priority}; policy accept; }` : ''}`);
        break;
      }
      case 'addFlowtable': lines.push(`add flowtable ${t} ${op.flowtable.name} { hook ingress priority 0; devices = { ${op.flowtable.devices.map((d) => `"${d}"`).join(', ')} }; }`); break;
      case 'delFlowtable': lines.push(`delete flowtable ${t} ${op.name}`); break;
      case 'flushChain': lines.push(`flush chain ${t} ${op.name}`); break;
      case 'delChain': lines.push(`delete chain ${t} ${op.name}`); break;
      case 'addRule': {
        const r = stmtText(fam, op.stmt);
        if (r) lines.push(`add rule ${t} ${op.chain} ${r}`);
        break;
      }
      case 'addElems': lines.push(`add element ${t} ${op.set} { ${op.elems.map((e) => elemText(fam, e)).join(', ')} }`); break;
      case 'addPacked': lines.push(`add element ${t} ${op.set} { ${op.elems.decode().map((e) => elemText(fam, e)).join(', ')} }`); break;
      case 'delElems': lines.push(`delete element ${t} ${op.set} { ${op.elems.map((e) => elemText(fam, e).replace(/ : .*$/, '')).join(', ')} }`); break;
    }
  }
  return lines.join('\n') + '\n';
}
