/**
 * DescribeProducers v0 (KIP-664), which kafkajs lacks: a partition leader's view of the producers
 * writing to its partitions — for each, its epoch, its coordinator's epoch and the first offset of
 * the transaction it has open there (-1: none). What `kafka-transactions.sh describe-producers`
 * and `find-hanging` read. Sent to each partition's leader.
 *
 * Request (Version: 0) => [topics] TAG_BUFFER
 *   topics => name [partition_indexes] TAG_BUFFER
 * Response (Version: 0) => throttle_time_ms [topics] TAG_BUFFER
 *   topics => name [partitions] TAG_BUFFER
 *     partitions => partition_index error_code error_message [active_producers] TAG_BUFFER
 *       active_producers => producer_id producer_epoch last_sequence last_timestamp coordinator_epoch current_txn_start_offset TAG_BUFFER
 */
import { answeredAsDecoded, flexibleRequest, readFlexibleResponse, readStructs, writeStructs } from './flexible';
import { Encoder, type KafkajsProtocol } from './kafkajs-protocol';

export const DESCRIBE_PRODUCERS_API_KEY = 61;

export interface TopicPartitions {
  readonly topic: string;
  readonly partitions: readonly number[];
}

export interface ActiveProducer {
  readonly producerId: string;
  readonly producerEpoch: number;
  readonly lastSequence: number;
  readonly lastTimestamp: string;
  readonly coordinatorEpoch: number;
  /** The first offset of the producer's open transaction on the partition; '-1' when it has none. */
  readonly currentTxnStartOffset: string;
}

export interface DescribedPartition {
  readonly topic: string;
  readonly partition: number;
  readonly errorCode: number;
  readonly errorMessage: string | null;
  readonly activeProducers: readonly ActiveProducer[];
}

export function describeProducersV0Request(topics: readonly TopicPartitions[]) {
  return flexibleRequest({ apiKey: DESCRIBE_PRODUCERS_API_KEY, apiVersion: 0, apiName: 'DescribeProducers' }, (encoder) =>
    writeStructs(encoder, topics, (e, { topic, partitions }) =>
      e.writeUVarIntString(topic).writeUVarIntArray(partitions.map((p) => new Encoder().writeInt32(p))),
    ).writeUVarInt(0),
  );
}

export async function decodeDescribeProducersV0Response(raw: Buffer): Promise<DescribedPartition[]> {
  return readFlexibleResponse(raw, (decoder) => {
    decoder.readInt32(); // throttle time
    const described: DescribedPartition[] = [];
    readStructs(decoder, (d) => {
      const topic = d.readUVarIntString() ?? '';
      readStructs(d, (p) => {
        const partition = p.readInt32();
        const errorCode = p.readInt16();
        const errorMessage = p.readUVarIntString();
        const activeProducers = readStructs(p, (a) => ({
          producerId: a.readInt64().toString(),
          producerEpoch: a.readInt32(),
          lastSequence: a.readInt32(),
          lastTimestamp: a.readInt64().toString(),
          coordinatorEpoch: a.readInt32(),
          currentTxnStartOffset: a.readInt64().toString(),
        }));
        described.push({ topic, partition, errorCode, errorMessage, activeProducers });
      });
    });
    decoder.readTaggedFields();
    return described;
  });
}

/** The request and how to read its answer; per-partition errors are in the answer, not thrown. */
export function describeProducersV0(topics: readonly TopicPartitions[]): KafkajsProtocol<DescribedPartition[]> {
  return answeredAsDecoded(describeProducersV0Request(topics), decodeDescribeProducersV0Response);
}
