// Raw DEFLATE (RFC 1951) for OpBatch.deflated_ops, assembled from pieces compressed once.
//
// A piece compressed on its own with a sync flush ends on a byte boundary with no final block,
// and refers to nothing before its own start; such pieces, stored (uncompressed) blocks and a
// final empty block, concatenated, are one valid DEFLATE stream. So a run of ops that many nodes
// share is compressed once and its bytes copied into every node's message, whatever comes before
// or after it there (the technique of parallel gzip tools).
import { constants, deflateRawSync, inflateRawSync } from 'node:zlib';

/** Compresses `data` as a piece for assemble(): byte-aligned, not final. */
export function deflatePiece(data: Buffer): Buffer {
  return deflateRawSync(data, { finishFlush: constants.Z_SYNC_FLUSH });
}

/** Compresses `data` as a whole stream (final block included). */
export function deflateWhole(data: Buffer): Buffer {
  return deflateRawSync(data);
}

/** A final block with no data (fixed Huffman, end of block): ends an assembled stream. */
const FINAL_BLOCK = Buffer.from([0x03, 0x00]);
const STORED_MAX = 65535;

/** Stored blocks holding `data` (not final), appended to `out` without copying `data`. */
function pushStored(out: Buffer[], data: readonly Buffer[]): number {
  let written = 0;
  let block: Buffer[] = [];
  let n = 0;
  const close = () => {
    // BFINAL 0, BTYPE 00, padded to the byte; then LEN and its one's complement, little-endian.
    out.push(Buffer.from([0, n & 255, n >> 8, ~n & 255, (~n >> 8) & 255]), ...block);
    written += 5 + n;
    block = [];
    n = 0;
  };
  for (let d of data) {
    while (n + d.length > STORED_MAX) {
      const take = STORED_MAX - n;
      block.push(d.subarray(0, take));
      n += take;
      d = d.subarray(take);
      close();
    }
    if (d.length > 0) { block.push(d); n += d.length; }
  }
  if (n > 0) close();
  return written;
}

/**
 * One DEFLATE stream from pieces in order: a Buffer is plain data (sent as stored blocks), an
 * object holds the bytes of deflatePiece() of its data. Returns the stream's parts and length.
 */
export function assemble(pieces: readonly (Buffer | { piece: Buffer })[]): { parts: Buffer[]; length: number } {
  const parts: Buffer[] = [];
  let length = 0;
  let plain: Buffer[] = [];
  const flush = () => {
    if (plain.length > 0) length += pushStored(parts, plain);
    plain = [];
  };
  for (const p of pieces) {
    if (Buffer.isBuffer(p)) { plain.push(p); continue; }
    flush();
    parts.push(p.piece);
    length += p.piece.length;
  }
  flush();
  parts.push(FINAL_BLOCK);
  return { parts, length: length + FINAL_BLOCK.length };
}

/**
 * Client side: the ops' bytes; throws on a corrupt stream or one that inflates past `maxBytes`.
 * Output in 64 KiB chunks (a message's size): with zlib's default 16 KiB, a message is four
 * chunks and a copy, and inflating is markedly slower.
 */
export function inflateOps(data: Uint8Array, maxBytes: number): Buffer {
  return inflateRawSync(data, { maxOutputLength: maxBytes, chunkSize: 64 * 1024 });
}
