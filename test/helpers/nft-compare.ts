// Two of the tracer's tables compared line by line (tests only): the table the tests plan (nft-world.ts)
// and the one read back from the kernel (nft-lift.ts). Each set with its kind and timeout, each element
// with its key and data, each chain with its hook, each rule at its position. A statement is written in
// one canonical form per meaning, as the tracer evaluates it (e.g. `srcCidr ... goto c` and a
// `classGoto` from that CIDR without masquerade are the same rule), with canonical address text.
import { addrText } from '../../src/native/addr-text';
import type { Elem, IpFamily, Stmt } from '../../src/backend/nft/types';
import { addrBytes, type FakeTable } from '../../src/backend/nft/fake';

/** One text per address (RFC 5952 for IPv6). */
export function canonAddr(a: string): string {
  const b = addrBytes(a);
  return addrText(Buffer.from(b), 0, b.length === 4 ? 2 : 10);
}

/** The network of a CIDR, with its host bits cleared, and an explicit prefix length. */
export function canonCidr(cidr: string): string {
  const [net, lenText] = cidr.split('/');
  const b = addrBytes(net);
  const bits = lenText === undefined ? b.length * 8 : Number(lenText);
  const masked = b.map((x, i) => x & ((0xff << (8 - Math.max(0, Math.min(8, bits - i * 8)))) & 0xff));
  return `${addrText(Buffer.from(masked), 0, b.length === 4 ? 2 : 10)}/${bits}`;
}

const isAll = (cidr: string): boolean => /\/0$/.test(canonCidr(cidr));

/** The statement in its canonical form (the same one for statements the tracer evaluates alike). */
export function canonStmt(st: Stmt): Stmt {
  switch (st.type) {
    case 'vmapPort': {
      // What the tracer tests: fib local, a CIDR unless /0, loopback for local rules without a CIDR or with
      // exceptLoopback. One form per combination (a local rule without either test keeps its /0).
      const cidr = st.daddrCidr !== undefined ? canonCidr(st.daddrCidr) : undefined;
      const narrow = cidr !== undefined && !isAll(cidr) ? cidr : undefined;
      const local = !!st.local;
      const loopTest = local && (cidr === undefined || !!st.exceptLoopback);
      const daddrCidr = narrow ?? (local && !loopTest ? cidr : undefined);
      return {
        type: 'vmapPort', map: st.map, ...(st.ctNew ? { ctNew: true } : {}), ...(local ? { local: true } : {}),
        ...(daddrCidr ? { daddrCidr } : {}), ...(narrow && loopTest ? { exceptLoopback: true } : {}),
      };
    }
    case 'vmapVip': return { type: 'vmapVip', map: st.map, ...(st.ctNew ? { ctNew: true } : {}) };
    case 'srcCidr':
      if (st.then === 'return') return { type: 'srcCidr', cidr: canonCidr(st.cidr), then: 'return' };
      return canonStmt({ type: 'classGoto', from: { cidr: st.cidr }, masq: false, chain: st.then.goto });
    case 'classGoto': {
      const from = typeof st.from === 'object' && 'cidr' in st.from ? (isAll(st.from.cidr) ? 'any' : { cidr: canonCidr(st.from.cidr) }) : st.from;
      if (from === 'any' && !st.masq) return { type: 'goto', chain: st.chain };
      return { type: 'classGoto', from, masq: st.masq, chain: st.chain };
    }
    case 'dnat': return { ...st, addr: canonAddr(st.addr) };
    default: return st;
  }
}

/** JSON with sorted keys: one text per value. */
function sortedJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(',')}]`;
  if (v && typeof v === 'object') return `{${Object.keys(v).sort().filter((k) => (v as Record<string, unknown>)[k] !== undefined).map((k) => `${JSON.stringify(k)}:${sortedJson((v as Record<string, unknown>)[k])}`).join(',')}}`;
  return JSON.stringify(v);
}

export function stmtLine(st: Stmt): string {
  const { type: s, ...rest } = canonStmt(st);
  return `${s} ${sortedJson(rest)}`;
}

export function elemLine(e: Elem): string {
  const v = (x: Extract<Elem, { type: 'vip' }>['verdict']): string => (x === 'drop' ? 'drop' : `goto ${x.goto}`);
  switch (e.type) {
    case 'vip': return `${canonAddr(e.addr)} . ${e.proto} . ${e.port} : ${v(e.verdict)}`;
    case 'port': return `${e.proto} . ${e.port} : ${v(e.verdict)}`;
    case 'pick': return `${e.addr !== undefined ? `${canonAddr(e.addr)} . ` : ''}${e.proto} . ${e.port} . ${e.slot} : ${canonAddr(e.epAddr)} . ${e.epPort}`;
    case 'pair': return `${canonAddr(e.addr)} . ${canonAddr(e.addr)}`;
    case 'addr': return canonAddr(e.addr);
  }
}

/**
 * The table as lines: sets (kind, timeout, capacity), their elements (sorted), chains (hook), rules
 * (by position). Elements the datapath adds (affinity) are not part of the plan.
 */
export function tableLines(t: FakeTable): string[] {
  const out: string[] = [`table ${t.exists ? 'exists' : 'absent'}`];
  for (const [name, s] of t.sets) {
    out.push(`set ${name}: ${s.spec.kind}${s.spec.timeoutSec !== undefined ? ` timeout ${s.spec.timeoutSec}s` : ''}${s.spec.size !== undefined ? ` size ${s.spec.size}` : ''}`);
    for (const l of [...s.elems.values()].map(elemLine).sort()) out.push(`set ${name} element ${l}`);
  }
  for (const [name, c] of t.chains) {
    const h = c.spec.hook;
    out.push(`chain ${name}${h ? `: ${h.type} ${h.hook} priority ${h.priority}` : ''}`);
    c.rules.forEach((r, i) => out.push(`chain ${name} rule ${i}: ${stmtLine(r)}`));
  }
  return out;
}

/**
 * What differs between the planned table and the kernel's: "- line" only in the plan, "+ line" only in
 * the kernel (each line counted: a duplicate on one side only shows). Empty when they hold the same.
 */
export function diffTables(planned: FakeTable, kernel: FakeTable): string[] {
  const count = (lines: string[]): Map<string, number> => {
    const m = new Map<string, number>();
    for (const l of lines) m.set(l, (m.get(l) ?? 0) + 1);
    return m;
  };
  const a = count(tableLines(planned)), b = count(tableLines(kernel));
  const out: string[] = [];
  for (const [l, n] of a) for (let i = b.get(l) ?? 0; i < n; i++) out.push(`- ${l}`);
  for (const [l, n] of b) for (let i = a.get(l) ?? 0; i < n; i++) out.push(`+ ${l}`);
  return out.sort((x, y) => x.slice(2).localeCompare(y.slice(2)) || x.localeCompare(y));
}

/** Both families. */
export function diffFakes(planned: Record<IpFamily, FakeTable>, kernel: Record<IpFamily, FakeTable>): string[] {
  return (['ip', 'ip6'] as IpFamily[]).flatMap((fam) => diffTables(planned[fam], kernel[fam]).map((l) => `${fam} ${l}`));
}
