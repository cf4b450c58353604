/**
 * Produce v12 (KIP-890 part 2, transaction version 2), which kafkajs 2.2.4 lacks (it stops at v7);
 * the patch registers it as version 12 of its Produce request, calling `produceV12` here, and sends
 * it only for a producer on transaction version 2 (kafka/transaction-version.ts): a transactional
 * Produce v12 asks the partition's leader to add the partition to the transaction itself, so the
 * producer sends no AddPartitionsToTxn.
 *
 * Request (Version: 12) => transactional_id acks timeout_ms [topic_data] TAG_BUFFER
 *   transactional_id => COMPACT_NULLABLE_STRING
 *   acks => INT16
 *   timeout_ms => INT32
 *   topic_data => name [partition_data] TAG_BUFFER
 *     name => COMPACT_STRING
 *     partition_data => index records TAG_BUFFER
 *       index => INT32
 *       records => COMPACT_RECORDS
 *
 * Response (Version: 12) => [responses] throttle_time_ms TAG_BUFFER (tag 0: node_endpoints)
 *   responses => name [partition_responses] TAG_BUFFER
 *     name => COMPACT_STRING
 *     partition_responses => index error_code base_offset log_append_time_ms log_start_offset [record_errors] error_message TAG_BUFFER (tag 0: current_leader)
 *       index => INT32
 *       error_code => INT16
 *       base_offset => INT64
 *       log_append_time_ms => INT64
 *       log_start_offset => INT64
 *       record_errors => batch_index batch_index_error_message TAG_BUFFER
 *         batch_index => INT32
 *         batch_index_error_message => COMPACT_NULLABLE_STRING
 *       error_message => COMPACT_NULLABLE_STRING
 *
 * The body is written by produce-writer.ts (the one-buffer writer, flexible); the answer is read
 * into kafkajs's Produce v7 shape and parsed by its parser (the first partition error thrown as
 * kafkajs's error, retriable ones retried by its producer). The tagged leader hints are skipped
 * (kafkajs refreshes metadata on NOT_LEADER_OR_FOLLOWER as for older versions).
 */
import { readFlexibleResponse, readStructs } from './flexible';
import { API_KEYS, encoderHolding, type KafkajsProtocol, type KafkajsRequest, parseProduce } from './kafkajs-protocol';
import { type ProduceRequestBody, writeProduceBody } from './produce-writer';

export interface ProduceV12Response {
  topics: Array<{
    topicName: string | null;
    partitions: Array<{ partition: number; errorCode: number; baseOffset: string; logAppendTime: string; logStartOffset: string }>;
  }>;
  /** 0: the broker's throttle time is in `clientSideThrottleTime` (kafkajs's convention). */
  throttleTime: 0;
  clientSideThrottleTime: number;
}

/** Raised when a message is of a shape the one-buffer writer does not take (kafkajs's own encoders write only v3-v7). */
export class ProduceV12MessageShapeError extends Error {
  constructor() {
    super('Produce v12 (transaction version 2) takes keys and values as strings, Buffers or null, headers as strings or Buffers (or arrays of them)');
    this.name = 'ProduceV12MessageShapeError';
  }
}

export function produceV12Request(body: Omit<ProduceRequestBody, 'flexible'>): KafkajsRequest {
  return {
    apiKey: API_KEYS.Produce,
    apiVersion: 12,
    apiName: 'Produce',
    expectResponse: () => body.acks !== 0,
    encode: async () => {
      const bytes = await writeProduceBody({ ...body, flexible: true });
      if (!bytes) throw new ProduceV12MessageShapeError();
      return encoderHolding(bytes);
    },
  };
}

export async function decodeProduceV12Response(raw: Buffer): Promise<ProduceV12Response> {
  return readFlexibleResponse(raw, (decoder) => {
    const topics = readStructs(decoder, (topic) => ({
      topicName: topic.readUVarIntString(),
      partitions: readStructs(topic, (p) => {
        const partition = {
          partition: p.readInt32(),
          errorCode: p.readInt16(),
          baseOffset: p.readInt64().toString(),
          logAppendTime: p.readInt64().toString(),
          logStartOffset: p.readInt64().toString(),
        };
        readStructs(p, (e) => ({ batchIndex: e.readInt32(), message: e.readUVarIntString() }));
        p.readUVarIntString(); // error_message
        return partition;
      }),
    }));
    const throttleTime = decoder.readInt32();
    decoder.readTaggedFields();
    return { topics, throttleTime: 0, clientSideThrottleTime: throttleTime };
  });
}

/** Version 12 of kafkajs's Produce for one call: the request and how to read its answer. */
export function produceV12(args: Omit<ProduceRequestBody, 'flexible'>): KafkajsProtocol<ProduceV12Response> {
  return {
    request: produceV12Request(args),
    response: { decode: decodeProduceV12Response, parse: parseProduce },
  };
}
