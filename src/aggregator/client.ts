// A producer's side of the aggregator's gRPC service: connect with a name, declare objects
// documents, learn when each is in the kernel (or why not). Also Remove and Status.
import { credentials, makeGenericClientConstructor, type Client, type ClientDuplexStream } from '@grpc/grpc-js';
import type { kpng } from '../gen/proto';
import { parseApiAddress } from '../util/address';
import { aggregatorService } from './server';

type Res = kpng.aggregatorv1.ProducerResult;
type Msg = kpng.aggregatorv1.IProducerMessage;

const Ctor = makeGenericClientConstructor(aggregatorService, 'Aggregator');

function client(address: string): Client & Record<string, (...a: unknown[]) => unknown> {
  const a = parseApiAddress(address);
  if (a.kind !== 'unix') throw new Error(`${address}: the aggregator is reached on a unix socket (unix:///PATH)`);
  return new Ctor(a.target, credentials.createInsecure()) as unknown as Client & Record<string, (...a: unknown[]) => unknown>;
}

/** A declare the aggregator did not commit. */
export class DeclareRefused extends Error {
  constructor(readonly result: Res) {
    super(result.error || 'refused');
    this.name = 'DeclareRefused';
  }
}

export class ProducerClient {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(r: Res): void; reject(e: Error): void }>();
  private readonly listeners = new Set<(r: Res) => void>();
  private closedWith?: Error;

  private constructor(private readonly c: Client, private readonly call: ClientDuplexStream<Msg, Res>) {
    call.on('data', (r: Res) => {
      const id = Number(r.id);
      const w = this.pending.get(id);
      if (w) { this.pending.delete(id); if (r.ok) w.resolve(r); else w.reject(new DeclareRefused(r)); }
      if (id === 0) for (const l of this.listeners) l(r);
    });
    const gone = (e: Error) => {
      this.closedWith ??= e;
      for (const w of this.pending.values()) w.reject(e);
      this.pending.clear();
    };
    call.on('error', (e: Error) => gone(e));
    call.on('end', () => gone(new Error('the aggregator closed the stream')));
  }

  /** Opens a producer stream; resolves once the aggregator accepted the name. */
  static async connect(address: string, producer: string): Promise<ProducerClient> {
    const c = client(address);
    const call = (c as unknown as { Produce(): ClientDuplexStream<Msg, Res> }).Produce();
    const p = new ProducerClient(c, call);
    try {
      await p.send({ hello: { producer } });
    } catch (e) {
      p.close();
      throw e;
    }
    return p;
  }

  private send(m: Msg): Promise<Res> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    const id = this.nextId++;
    return new Promise<Res>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.call.write({ ...m, id });
    });
  }

  /** Replaces this producer's objects; resolves when they are in the kernel, rejects with the reason. */
  declare(doc: unknown, resync = false): Promise<Res> {
    return this.send({ declare: { objectsJson: JSON.stringify(doc), resync } });
  }

  /** Changes this producer's objects incrementally (src/aggregator/patch.ts): deletes, then sets. */
  patch(p: { set?: unknown; delete?: unknown }): Promise<Res> {
    return this.send({ patch: { setJson: p.set === undefined ? '' : JSON.stringify(p.set), deleteJson: p.delete === undefined ? '' : JSON.stringify(p.delete) } });
  }

  /** Later outcomes (retries of a refused change). */
  onResult(l: (r: Res) => void): void { this.listeners.add(l); }

  close(): void {
    this.closedWith ??= new Error('closed');
    this.call.end();
    this.c.close();
  }
}

function unary<T>(address: string, method: 'Remove' | 'Status', req: object): Promise<T> {
  const c = client(address);
  return new Promise<T>((resolve, reject) => {
    (c[method] as (r: object, cb: (e: Error | null, r: T) => void) => void)(req, (e, r) => { c.close(); if (e) reject(e); else resolve(r); });
  });
}

export const removeProducer = (address: string, producer: string): Promise<void> => unary<object>(address, 'Remove', { producer }).then(() => undefined);
export const aggregatorStatus = (address: string): Promise<unknown> =>
  unary<kpng.aggregatorv1.StatusReply>(address, 'Status', {}).then((r) => JSON.parse(r.producersJson || '[]') as unknown);
