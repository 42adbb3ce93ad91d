// Reads Kubernetes objects as `kubectl get nodes,services,endpointslices -A -o yaml|json`
// prints them: a List (or any object with `items`), a single object, a JSON array, or a
// multi-document YAML stream. Objects of other kinds are ignored.
import { yaml } from '../util/lazy-yaml';
import type { Kind } from '../store/cluster';

export interface ObjectsByKind {
  Service: unknown[];
  EndpointSlice: unknown[];
  Node: unknown[];
  /** Objects of kinds kpng does not read, or unsupported API versions: counted, not used. */
  ignored: number;
  /** Why an object was not taken (e.g. discovery.k8s.io/v1beta1), one entry per object. */
  notes: string[];
}

const KINDS: readonly Kind[] = ['Service', 'EndpointSlice', 'Node'];

/** Parses the text of a file. Throws (with a message naming the problem) when it is not YAML/JSON at all. */
export function parseObjectsText(text: string): ObjectsByKind {
  const out: ObjectsByKind = { Service: [], EndpointSlice: [], Node: [], ignored: 0, notes: [] };
  // JSON (`-o json`) first: the YAML parser builds a syntax tree many times the text's size, so a JSON
  // dump of a small cluster would peak at hundreds of MiB through it. Text that is not valid JSON goes
  // to the YAML parser, whose errors name the line.
  const head = text.trimStart()[0];
  if (head === '{' || head === '[') {
    let value: unknown;
    try { value = JSON.parse(text); } catch { value = undefined; }
    if (value !== undefined) { collect(value, out, 0); return out; }
  }
  const docs = yaml().parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  for (const doc of list) {
    if (doc.errors.length) throw new Error(`not valid YAML or JSON: ${doc.errors[0].message.split('\n')[0]}`);
    let value: unknown;
    try {
      // maxAliasCount bounds "billion laughs" alias expansion.
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (e) {
      throw new Error(`not valid YAML or JSON: ${(e as Error).message.split('\n')[0]}`);
    }
    collect(value, out, 0);
  }
  return out;
}

function collect(v: unknown, out: ObjectsByKind, depth: number): void {
  if (v === null || v === undefined) return;
  if (depth > 3) { out.ignored++; return; }
  if (Array.isArray(v)) { for (const x of v) collect(x, out, depth + 1); return; }
  if (typeof v !== 'object') { out.ignored++; return; }
  const o = v as Record<string, unknown>;
  if (Array.isArray(o.items) && (typeof o.kind !== 'string' || o.kind.endsWith('List'))) {
    for (const x of o.items) collect(x, out, depth + 1);
    return;
  }
  const kind = o.kind as Kind;
  if (!KINDS.includes(kind)) { out.ignored++; return; }
  if (kind === 'EndpointSlice' && o.apiVersion !== undefined && o.apiVersion !== 'discovery.k8s.io/v1') {
    out.ignored++;
    out.notes.push(`EndpointSlice with apiVersion ${String(o.apiVersion)} (only discovery.k8s.io/v1 is read)`);
    return;
  }
  out[kind].push(o);
}
