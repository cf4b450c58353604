/**
 * OffsetFetch v7 (require_stable, KIP-447), which kafkajs 2.2.4 lacks (it stops at v4); the patch
 * registers it as version 7 of its OffsetFetch request, calling `offsetFetchV7` here.
 *
 * Request (Version: 7) => group_id [topics] require_stable TAG_BUFFER
 *   group_id => COMPACT_STRING
 *   topics => name [partition_indexes] TAG_BUFFER
 *     name => COMPACT_STRING
 *     partition_indexes => INT32
 *   require_stable => BOOLEAN
 *
 * Response (Version: 7) => throttle_time_ms [topics] error_code TAG_BUFFER
 *   throttle_time_ms => INT32
 *   topics => name [partitions] TAG_BUFFER
 *     name => COMPACT_STRING
 *     partitions => partition_index committed_offset committed_leader_epoch metadata error_code TAG_BUFFER
 *       partition_index => INT32
 *       committed_offset => INT64
 *       committed_leader_epoch => INT32
 *       metadata => COMPACT_NULLABLE_STRING
 *       error_code => INT16
 *   error_code => INT16
 *
 * v6 is the first flexible version; v7 adds require_stable: with it the coordinator answers
 * UNSTABLE_OFFSET_COMMIT (88, retriable) for a partition whose offset a pending transaction is
 * about to move, instead of the old offset. topics is a COMPACT_NULLABLE_ARRAY; as in kafkajs's
 * v2-v4, an empty list is sent as null ("all topics of the group"). The decoded answer has the
 * shape of kafkajs's v1-v4 (responses[].partitions[]), plus each partition's leaderEpoch.
 */
import { flexibleRequest, readFlexibleResponse, readStructs, writeStructs } from './flexible';
import { API_KEYS, type KafkajsProtocol, type KafkajsRequest, parseOffsetFetch } from './kafkajs-protocol';

export interface OffsetFetchV7Args {
  groupId: string;
  /** null or empty: every topic of the group. */
  topics?: Array<{ topic: string; partitions: Array<{ partition: number }> }> | null;
  /** Answer UNSTABLE_OFFSET_COMMIT rather than an offset a pending transaction is about to move. */
  requireStable?: boolean;
}

export interface OffsetFetchV7Response {
  /** 0: the broker's throttle time is in `clientSideThrottleTime` (kafkajs's convention). */
  throttleTime: 0;
  clientSideThrottleTime: number;
  responses: Array<{
    topic: string | null;
    partitions: Array<{ partition: number; offset: string; leaderEpoch: number; metadata: string | null; errorCode: number }>;
  }>;
  errorCode: number;
}

export function offsetFetchV7Request({ groupId, topics, requireStable = false }: OffsetFetchV7Args): KafkajsRequest {
  return flexibleRequest({ apiKey: API_KEYS.OffsetFetch, apiVersion: 7, apiName: 'OffsetFetch' }, (encoder) => {
    encoder.writeUVarIntString(groupId);
    if (topics == null || topics.length === 0) {
      encoder.writeUVarInt(0); // a null array
    } else {
      writeStructs(encoder, topics, (topic, { topic: name, partitions }) => {
        topic.writeUVarIntString(name).writeUVarInt(partitions.length + 1);
        for (const { partition } of partitions) topic.writeInt32(partition);
        return topic;
      });
    }
    return encoder.writeInt8(requireStable ? 1 : 0).writeUVarInt(0);
  });
}

export async function decodeOffsetFetchV7Response(raw: Buffer): Promise<OffsetFetchV7Response> {
  return readFlexibleResponse(raw, (decoder) => {
    const throttleTime = decoder.readInt32();
    const responses = readStructs(decoder, (topic) => ({
      topic: topic.readUVarIntString(),
      partitions: readStructs(topic, (partition) => ({
        partition: partition.readInt32(),
        offset: partition.readInt64().toString(),
        leaderEpoch: partition.readInt32(),
        metadata: partition.readUVarIntString(),
        errorCode: partition.readInt16(),
      })),
    }));
    const errorCode = decoder.readInt16();
    decoder.readTaggedFields();
    return { throttleTime: 0, clientSideThrottleTime: throttleTime, responses, errorCode };
  });
}

/** Version 7 of kafkajs's OffsetFetch for one call: the request and how to read its answer. */
export function offsetFetchV7(args: OffsetFetchV7Args): KafkajsProtocol<OffsetFetchV7Response> {
  return {
    request: offsetFetchV7Request(args),
    response: { decode: decodeOffsetFetchV7Response, parse: parseOffsetFetch },
  };
}
