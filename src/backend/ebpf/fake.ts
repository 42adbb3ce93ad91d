// A fake of the socket-LB dataplane's kernel side (EbpfMaps, src/native/ebpf.ts): the two BPF maps in
// memory, every batch recorded, a failure on demand (the failAt-th apply: ENOSPC; an update past
// `capacity`: E2BIG, as a full hash map), and a resolver that reads the maps as a connect() would. The
// failing variant is faulty.ts; the real maps and programs: test/e2e/ebpf*.test.ts.
import type { EbpfDump, EbpfMapGroup, EbpfMaps, EbpfOpenResult } from '../../native/ebpf';
import { decodeBackend, decodeSvcKey, decodeSvcValue, FLAG_REFUSE, SVC_KEY_SIZE, SVC_MAP } from './maps';

/** The two maps in memory behind EbpfMaps, recording every group; `failAt` makes the n-th apply fail. */
export class FakeEbpfMaps implements EbpfMaps {
  svc = new Map<string, Buffer>();
  be = new Map<number, Buffer>();
  groups: EbpfMapGroup[][] = [];
  failAt = -1;
  /** max_entries of each map: an update that would add a key past it fails as the kernel's does (E2BIG). */
  capacity = Infinity;
  /**
   * Service addresses a connect() would have found inconsistent (a slot 0 whose slot or backend is
   * missing: refused) after some group of a batch, as "addr:port" (checked after every group).
   */
  refusedBetween = new Set<string>();
  info: EbpfOpenResult = { handle: 1, object: 'fake', reusedMaps: 0, reusedLinks: 0, pendingLinks: 0, programs: [], found: [], hostNetns: 0, socketDestroyOff: '' };
  activated = 0;
  activate(): number { this.activated += this.info.pendingLinks; const n = this.info.pendingLinks; this.info.pendingLinks = 0; return n; }
  async apply(groups: EbpfMapGroup[]) {
    this.groups.push(groups);
    if (this.groups.length === this.failAt) throw Object.assign(new Error('update kpng_svc: No space left on device'), { errno: 28, code: 'ENOSPC', group: 0, element: 0, syscalls: 1 });
    for (const [gi, g] of groups.entries()) {
      const ks = g.map === SVC_MAP ? SVC_KEY_SIZE : 4, vs = 20;
      const map: Map<string | number, Buffer> = g.map === SVC_MAP ? this.svc : this.be;
      for (let i = 0; i < g.count; i++) {
        const b = g.keys.subarray(i * ks, (i + 1) * ks);
        const k = g.map === SVC_MAP ? b.toString('hex') : b.readUInt32LE(0);
        if (g.op === 'delete') { map.delete(k); continue; }
        if (!map.has(k) && map.size >= this.capacity) {
          throw Object.assign(new Error(`update ${g.map}: Argument list too long`), { errno: 7, code: 'E2BIG', group: gi, element: i, syscalls: gi + 1 });
        }
        map.set(k, Buffer.from(g.values!.subarray(i * vs, (i + 1) * vs)));
      }
      for (const addr of this.inconsistent()) this.refusedBetween.add(addr);
    }
    return { syscalls: groups.length, ms: 0 };
  }

  /** Service addresses whose slot 0 names a slot or backend the maps do not hold. */
  inconsistent(): string[] {
    const out: string[] = [];
    for (const [k, v] of this.svc) {
      const key = decodeSvcKey(Buffer.from(k, 'hex'));
      const head = decodeSvcValue(v);
      if (key.slot !== 0 || head.flags & FLAG_REFUSE) continue;
      for (let s = 1; s <= head.count; s++) {
        const slot = this.svc.get(slotKey(k, s));
        if (!slot || !this.be.has(decodeSvcValue(slot).backendId)) { out.push(`${key.addr}:${key.port}`); break; }
      }
    }
    return out;
  }
  async dump(map: string): Promise<EbpfDump> {
    const svc = map === SVC_MAP;
    const entries = svc ? [...this.svc].map(([k, v]) => [Buffer.from(k, 'hex'), v]) : [...this.be].map(([k, v]) => { const b = Buffer.alloc(4); b.writeUInt32LE(k); return [b, v]; });
    return { count: entries.length, keySize: svc ? SVC_KEY_SIZE : 4, valueSize: 20, keys: Buffer.concat(entries.map((e) => e[0])), values: Buffer.concat(entries.map((e) => e[1])), syscalls: entries.length * 2 + 1 };
  }
  /** One list per destroySockets call: "service-addr:port/proto backend-addr:port" per triple. */
  destroyCalls: string[][] = [];
  async destroySockets(b: Buffer, n: number) {
    this.destroyCalls.push(Array.from({ length: n }, (_, i) => {
      const v = decodeBackend(b, i * 40), vip = decodeBackend(Buffer.concat([b.subarray(i * 40 + 20, i * 40 + 38), Buffer.from([b[i * 40 + 18], 0])]));
      return `${vip.addr}:${vip.port}/${b[i * 40 + 38] === 6 ? 'tcp' : 'udp'} ${v.addr}:${v.port}`;
    }).sort());
    return { tcp: 0, udp: 0, namespaces: 1, syscalls: 1, ms: 0 };
  }
  /** Programs whose links the kernel severed (the real one: their cgroup was removed). */
  severedLinks: string[] = [];
  severed(): string[] { return this.severedLinks; }
  async close() {}
  /** "addr:port -> backend, backend" per service, as a connect() would resolve it. */
  resolve(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [k, v] of this.svc) {
      const key = decodeSvcKey(Buffer.from(k, 'hex'));
      if (key.slot !== 0) continue;
      const head = decodeSvcValue(v);
      if (head.flags & FLAG_REFUSE) { out[`${key.addr}:${key.port}`] = 'refuse'; continue; }
      const list: string[] = [];
      for (let s = 1; s <= head.count; s++) {
        const slot = this.svc.get(slotKey(k, s))!;
        const b = this.be.get(decodeSvcValue(slot).backendId)!;
        list.push(`${decodeBackend(b).addr}:${decodeBackend(b).port}`);
      }
      out[`${key.addr}:${key.port}`] = list.sort().join(',');
    }
    return out;
  }
}

/** The hex key of slot `s` of the service address whose slot 0 key is `head` (hex). */
function slotKey(head: string, s: number): string {
  return head.slice(0, 40) + Buffer.from([s & 0xff, s >> 8, 0, 0]).toString('hex');
}
