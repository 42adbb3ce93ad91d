// The aggregator's gRPC service (proto/aggregator.proto) on a unix socket, mode 0600: outside
// producers declare their objects documents; each Declare is answered when it is in the kernel or
// refused. The socket is created the same safe way as the state API's (src/util/unix-socket.ts);
// every connection's peer credentials (pid, uid, gid, command) are logged with the producer's name.
import * as net from 'node:net';
import { Server, ServerCredentials, status, type ServerDuplexStream, type ServiceDefinition } from '@grpc/grpc-js';
import { kpng } from '../gen/proto';
import { parseApiAddress } from '../util/address';
import { describePeer, unixPeerCredentials } from '../native/peer';
import { prepareUnixSocket } from '../util/unix-socket';
import type { Logger } from '../util/log';
import { ProducerRefused, type Aggregator, type ProducerHandle } from './aggregator';
import { parseObjects } from './objects';
import { parsePatch } from './patch';

const pb = kpng.aggregatorv1;

type Msg = kpng.aggregatorv1.IProducerMessage;
type Res = kpng.aggregatorv1.IProducerResult;

const ser = <T>(enc: (m: T) => { finish(): Uint8Array }) => (m: T) => Buffer.from(enc(m).finish());

export const aggregatorService = {
  Produce: {
    path: '/kpng.aggregatorv1.Aggregator/Produce', requestStream: true, responseStream: true,
    requestSerialize: ser((m: Msg) => pb.ProducerMessage.encode(m)),
    requestDeserialize: (b: Buffer): Msg | { bad: string } => { try { return pb.ProducerMessage.decode(b); } catch (e) { return { bad: (e as Error).message }; } },
    responseSerialize: ser((m: Res) => pb.ProducerResult.encode(m)),
    responseDeserialize: (b: Buffer) => pb.ProducerResult.decode(b),
  },
  Remove: {
    path: '/kpng.aggregatorv1.Aggregator/Remove', requestStream: false, responseStream: false,
    requestSerialize: ser((m: kpng.aggregatorv1.IRemoveRequest) => pb.RemoveRequest.encode(m)),
    requestDeserialize: (b: Buffer) => pb.RemoveRequest.decode(b),
    responseSerialize: ser((m: kpng.aggregatorv1.IRemoveReply) => pb.RemoveReply.encode(m)),
    responseDeserialize: (b: Buffer) => pb.RemoveReply.decode(b),
  },
  Status: {
    path: '/kpng.aggregatorv1.Aggregator/Status', requestStream: false, responseStream: false,
    requestSerialize: ser((m: kpng.aggregatorv1.IStatusRequest) => pb.StatusRequest.encode(m)),
    requestDeserialize: (b: Buffer) => pb.StatusRequest.decode(b),
    responseSerialize: ser((m: kpng.aggregatorv1.IStatusReply) => pb.StatusReply.encode(m)),
    responseDeserialize: (b: Buffer) => pb.StatusReply.decode(b),
  },
} satisfies ServiceDefinition;

/** A refusal as a Result. */
export function refusal(id: number, e: unknown): Res {
  const failures = e instanceof ProducerRefused ? e.failures.map((f) => ({ op: f.op, object: f.object, code: f.code, message: f.message ?? '' })) : [];
  return { id, ok: false, error: (e as Error).message, failures };
}

export interface AggregatorServer { address: string; close(): Promise<void> }

/** Serves `agg` on unix:///PATH (mode 0600). Objects documents are limited to `maxMessageBytes` (default 16 MiB). */
export async function serveAggregator(agg: Aggregator, opts: { listen: string; log: Logger; maxMessageBytes?: number }): Promise<AggregatorServer> {
  const { log } = opts;
  const addr = parseApiAddress(opts.listen);
  if (addr.kind !== 'unix') throw new Error(`--aggregator-listen ${opts.listen}: the aggregator listens on a unix socket only (unix:///run/kpng/aggregator.sock)`);
  const server = new Server({ 'grpc.max_receive_message_length': opts.maxMessageBytes ?? 16 << 20 });
  const streams = new Set<ServerDuplexStream<Msg | { bad: string }, Res>>();

  server.addService(aggregatorService, {
    Produce: (call: ServerDuplexStream<Msg | { bad: string }, Res>) => {
      streams.add(call);
      let producer: ProducerHandle | undefined;
      const fail = (code: status, details: string) => { call.emit('error', { code, details }); streams.delete(call); producer?.disconnect(); };
      call.on('data', (m: Msg | { bad: string }) => {
        if ('bad' in m) return fail(status.INVALID_ARGUMENT, `undecodable message: ${m.bad}`);
        const id = Number(m.id ?? 0);
        if (!producer) {
          if (!m.hello?.producer) return fail(status.INVALID_ARGUMENT, 'the first message must be Hello with the producer name');
          try {
            producer = agg.connect(m.hello.producer, { peer: call.getPeer() });
          } catch (e) {
            return fail(status.FAILED_PRECONDITION, (e as Error).message);
          }
          // Retries after a refusal report here, with id 0.
          producer.on((ev) => {
            call.write(ev.kind === 'committed' ? { id: 0, ok: true, commit: ev.info.commit, ops: ev.info.ops } : refusal(0, ev.error));
          });
          call.write({ id, ok: true });
          return;
        }
        if (!m.declare && !m.patch) return fail(status.INVALID_ARGUMENT, 'expected Declare or Patch');
        let ops;
        try {
          ops = m.declare
            ? parseObjects(JSON.parse(m.declare.objectsJson || '{}'))
            : parsePatch({ set: JSON.parse(m.patch!.setJson || 'null'), delete: JSON.parse(m.patch!.deleteJson || 'null') }, producer.desired);
        } catch (e) {
          call.write({ id, ok: false, error: `producer ${producer.name}: bad ${m.declare ? 'objects document' : 'patch'}: ${(e as Error).message}` });
          return;
        }
        (m.declare ? producer.declare(ops, { resync: !!m.declare.resync }) : producer.apply(ops)).then(
          (i) => call.write({ id, ok: true, commit: i.commit, ops: i.ops }),
          (e) => call.write(refusal(id, e)),
        ).catch(() => { /* the stream is gone */ });
      });
      const end = () => { if (streams.delete(call)) { producer?.disconnect(); call.end(); } };
      call.on('end', end);
      call.on('error', () => { streams.delete(call); producer?.disconnect(); });
      call.on('cancelled', () => { streams.delete(call); producer?.disconnect(); });
    },
    Remove: (call: { request: kpng.aggregatorv1.RemoveRequest; getPeer(): string }, cb: (e: { code: status; details: string } | null, r?: object) => void) => {
      log.info(`aggregator: removal of producer ${call.request.producer} asked by ${call.getPeer()}`);
      agg.remove(call.request.producer).then(() => cb(null, {}), (e) => cb({ code: status.NOT_FOUND, details: (e as Error).message }));
    },
    Status: (_call: unknown, cb: (e: null, r: object) => void) => cb(null, { producersJson: JSON.stringify(agg.status()) }),
  });

  // We accept the connections ourselves (grpc-js hides the socket): each one's peer credentials
  // (SO_PEERCRED) become the peer name its calls report, so the log says which process a producer is.
  const injector = server.createConnectionInjector(ServerCredentials.createInsecure());
  const listener = net.createServer((socket) => {
    const cred = unixPeerCredentials(socket);
    if (cred) Object.defineProperty(socket, 'remoteAddress', { value: describePeer(cred), configurable: true });
    injector.injectConnection(socket);
  });
  const plan = await prepareUnixSocket(addr.path, { log });
  try {
    await new Promise<void>((resolve, reject) => {
      listener.once('error', reject);
      listener.listen(plan.tmpPath, () => { listener.off('error', reject); resolve(); });
    });
  } catch (e) {
    injector.destroy();
    server.forceShutdown();
    await plan.abandon();
    throw new Error(`cannot serve the aggregator on ${addr.text}: ${(e as Error).message}`);
  }
  const cleanup = await plan.publish();
  log.info(`aggregator: serving producers on ${addr.text}`);
  return {
    address: addr.text,
    async close() {
      for (const s of streams) s.end();
      const closed = new Promise<void>((resolve) => listener.close(() => resolve()));
      injector.drain(1000);
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => { server.forceShutdown(); resolve(); }, 1000);
        server.tryShutdown(() => { clearTimeout(t); resolve(); });
      });
      injector.destroy();
      await closed;
      await cleanup();
    },
  };
}
