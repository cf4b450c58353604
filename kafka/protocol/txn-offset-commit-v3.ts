/**
 * TxnOffsetCommit v3 (KIP-447), which kafkajs 2.2.4 lacks (it stops at v1); the patch registers it
 * as version 3 of its TxnOffsetCommit request, calling `txnOffsetCommitV3` here.
 *
 * Request (Version: 3) => transactional_id group_id producer_id producer_epoch generation_id member_id group_instance_id [topics] TAG_BUFFER
 *   transactional_id => COMPACT_STRING
 *   group_id => COMPACT_STRING
 *   producer_id => INT64
 *   producer_epoch => INT16
 *   generation_id => INT32
 *   member_id => COMPACT_STRING
 *   group_instance_id => COMPACT_NULLABLE_STRING
 *   topics => name [partitions] TAG_BUFFER
 *     name => COMPACT_STRING
 *     partitions => partition_index committed_offset committed_leader_epoch committed_metadata TAG_BUFFER
 *       partition_index => INT32
 *       committed_offset => INT64
 *       committed_leader_epoch => INT32
 *       committed_metadata => COMPACT_NULLABLE_STRING
 *
 * Response (Version: 3) => throttle_time_ms [topics] TAG_BUFFER
 *   throttle_time_ms => INT32
 *   topics => name [partitions] TAG_BUFFER
 *     name => COMPACT_STRING
 *     partitions => partition_index error_code TAG_BUFFER
 *       partition_index => INT32
 *       error_code => INT16
 *
 * v3 is the first flexible version and adds the consumer group metadata (generation_id, member_id,
 * group_instance_id): the group coordinator rejects the commit of a stale generation with
 * ILLEGAL_GENERATION (22), of an unknown member with UNKNOWN_MEMBER_ID (25), of a fenced static
 * member with FENCED_INSTANCE_ID (82). Generation -1 with an empty member id (the spec's defaults)
 * disables that check.
 *
 * v4 adds the error TRANSACTION_ABORTABLE (120); v5 has v4's bytes and is how a producer on
 * transaction version 2 (KIP-890 part 2) commits: the group coordinator then adds the group's
 * offsets to the transaction itself (no AddOffsetsToTxn). The patch registers v5 apart from the
 * versions kafkajs picks by itself, sent only for such a producer.
 *
 * @see https://cwiki.apache.org/confluence/display/KAFKA/KIP-447%3A+Producer+scalability+for+exactly+once+semantics
 */
import { flexibleRequest, readFlexibleResponse, readStructs, writeStructs } from './flexible';
import { API_KEYS, type Int64, type KafkajsProtocol, type KafkajsRequest, parseTxnOffsetCommit } from './kafkajs-protocol';

export interface TxnOffsetCommitV3Args {
  transactionalId: string;
  groupId: string;
  producerId: Int64;
  producerEpoch: number;
  /** The consumer generation the offsets belong to; -1 (the default): not checked. */
  generationId?: number | null;
  /** The member that commits them; '' (the default): not checked. */
  memberId?: string | null;
  groupInstanceId?: string | null;
  topics: Array<{
    topic: string;
    partitions: Array<{ partition: number; offset: Int64; leaderEpoch?: number | null; metadata?: string | null }>;
  }>;
}

export interface TxnOffsetCommitV3Response {
  /** 0: the broker's throttle time is in `clientSideThrottleTime` (kafkajs's convention from v1 on). */
  throttleTime: 0;
  clientSideThrottleTime: number;
  topics: Array<{ topic: string | null; partitions: Array<{ partition: number; errorCode: number }> }>;
}

export function txnOffsetCommitV3Request(args: TxnOffsetCommitV3Args): KafkajsRequest {
  return txnOffsetCommitRequest(args, 3);
}

/** The same fields as v3, as version 3 or 5. */
function txnOffsetCommitRequest({
  transactionalId,
  groupId,
  producerId,
  producerEpoch,
  generationId,
  memberId,
  groupInstanceId,
  topics,
}: TxnOffsetCommitV3Args, apiVersion: 3 | 5): KafkajsRequest {
  return flexibleRequest({ apiKey: API_KEYS.TxnOffsetCommit, apiVersion, apiName: 'TxnOffsetCommit' }, (encoder) =>
    writeStructs(
      encoder
        .writeUVarIntString(transactionalId)
        .writeUVarIntString(groupId)
        .writeInt64(producerId)
        .writeInt16(producerEpoch)
        .writeInt32(generationId ?? -1)
        .writeUVarIntString(memberId ?? '')
        .writeUVarIntString(groupInstanceId ?? null),
      topics,
      (topic, { topic: name, partitions }) =>
        writeStructs(topic.writeUVarIntString(name), partitions, (partition, { partition: index, offset, leaderEpoch, metadata }) =>
          partition
            .writeInt32(index)
            .writeInt64(offset)
            .writeInt32(leaderEpoch ?? -1)
            .writeUVarIntString(metadata ?? null),
        ),
    ).writeUVarInt(0),
  );
}

export async function decodeTxnOffsetCommitV3Response(raw: Buffer): Promise<TxnOffsetCommitV3Response> {
  return readFlexibleResponse(raw, (decoder) => {
    const throttleTime = decoder.readInt32();
    const topics = readStructs(decoder, (topic) => ({
      topic: topic.readUVarIntString(),
      partitions: readStructs(topic, (partition) => ({ partition: partition.readInt32(), errorCode: partition.readInt16() })),
    }));
    decoder.readTaggedFields();
    return { throttleTime: 0, clientSideThrottleTime: throttleTime, topics };
  });
}

/** Version 3 of kafkajs's TxnOffsetCommit for one call: the request and how to read its answer. */
export function txnOffsetCommitV3(args: TxnOffsetCommitV3Args): KafkajsProtocol<TxnOffsetCommitV3Response> {
  return {
    request: txnOffsetCommitV3Request(args),
    response: { decode: decodeTxnOffsetCommitV3Response, parse: parseTxnOffsetCommit },
  };
}

/** Version 5 (transaction version 2): v3's fields and answer. */
export function txnOffsetCommitV5(args: TxnOffsetCommitV3Args): KafkajsProtocol<TxnOffsetCommitV3Response> {
  return {
    request: txnOffsetCommitRequest(args, 5),
    response: { decode: decodeTxnOffsetCommitV3Response, parse: parseTxnOffsetCommit },
  };
}
