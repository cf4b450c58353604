/**
 * Flexible request versions (KIP-482: compact strings and arrays, tag buffers) as kafkajs sends
 * them. kafkajs writes request header v1 for every request and reads only the correlation id of a
 * response. A flexible version needs request header v2 (v1 + a tag buffer) and is answered with
 * response header v1 (the correlation id + a tag buffer). So a flexible body starts with the
 * request header's empty tag buffer, and a flexible response's payload with the response header's
 * tag buffer, skipped here. We send no tagged fields and skip any we are sent.
 */
import { Decoder, Encoder, type KafkajsDecoder, type KafkajsEncoder, type KafkajsProtocol, type KafkajsRequest } from './kafkajs-protocol';

/** A request whose body `writeBody` writes after the request header v2 tag buffer. */
export function flexibleRequest(
  meta: { apiKey: number; apiVersion: number; apiName: string },
  writeBody: (encoder: KafkajsEncoder) => KafkajsEncoder,
): KafkajsRequest {
  return {
    ...meta,
    encode: async () => writeBody(new Encoder().writeUVarInt(0)),
  };
}

/** Reads a response body with `readBody`, after the response header v1 tag buffer. */
export function readFlexibleResponse<T>(raw: Buffer, readBody: (decoder: KafkajsDecoder) => T): T {
  const decoder = new Decoder(raw);
  decoder.readTaggedFields();
  return readBody(decoder);
}

/** A COMPACT_ARRAY of structs, each written by `write` and closed by its (empty) tag buffer. */
export function writeStructs<T>(encoder: KafkajsEncoder, items: readonly T[], write: (encoder: KafkajsEncoder, item: T) => KafkajsEncoder): KafkajsEncoder {
  return encoder.writeUVarIntArray(items.map((item) => write(new Encoder(), item).writeUVarInt(0)));
}

/** A COMPACT_ARRAY of structs, each read by `read` and its tag buffer skipped; a null array as []. */
export function readStructs<T>(decoder: KafkajsDecoder, read: (decoder: KafkajsDecoder) => T): T[] {
  return (
    decoder.readUVarIntArray((d) => {
      const struct = read(d);
      d.readTaggedFields();
      return struct;
    }) ?? []
  );
}

/**
 * A request whose answer is handed over as decoded: its errors (per partition, per id) are in the
 * answer for the caller to read, not raised as kafkajs errors.
 */
export function answeredAsDecoded<T>(request: KafkajsRequest, decode: (raw: Buffer) => Promise<T>): KafkajsProtocol<T> {
  return { request, response: { decode, parse: async (decoded: T) => decoded } };
}
