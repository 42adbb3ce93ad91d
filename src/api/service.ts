// The Watch service definition for @grpc/grpc-js, with the protobufjs codec as serializers
// (no proto-loader at run time). The server sends pre-encoded OpBatch messages.
import type { ServiceDefinition } from '@grpc/grpc-js';
import { decodeOpBatch, decodeRequest, encodeRequest, WATCH_METHOD, type BadRequest, type WatchRequest, type WireOp } from './codec';

export const watchService = {
  Watch: {
    path: WATCH_METHOD,
    requestStream: true,
    responseStream: true,
    requestSerialize: (r: Partial<WatchRequest>) => encodeRequest(r),
    requestDeserialize: (b: Buffer): WatchRequest | BadRequest => decodeRequest(b),
    responseSerialize: (b: Buffer) => b,
    responseDeserialize: (b: Buffer): WireOp[] => decodeOpBatch(b),
    originalName: 'watch',
  },
} satisfies ServiceDefinition;
