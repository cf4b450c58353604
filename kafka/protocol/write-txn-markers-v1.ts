/**
 * WriteTxnMarkers v1 (KIP-98; flexible since v1), which kafkajs lacks: writes a transaction's
 * COMMIT or ABORT marker on partitions, sent to their leader. Brokers send it to each other to end
 * transactions; an operator (`kafka-transactions.sh abort`, Admin.abortTransaction) sends it to end
 * a hanging transaction — one open on a partition although its coordinator ended it — with the
 * producer id, epoch and coordinator epoch DescribeProducers reports. Needs ClusterAction.
 *
 * Request (Version: 1) => [markers] TAG_BUFFER
 *   markers => producer_id producer_epoch transaction_result [topics] coordinator_epoch TAG_BUFFER
 *     topics => name [partition_indexes] TAG_BUFFER
 * Response (Version: 1) => [markers] TAG_BUFFER
 *   markers => producer_id [topics] TAG_BUFFER
 *     topics => name [partitions] TAG_BUFFER
 *       partitions => partition_index error_code TAG_BUFFER
 */
import type { TopicPartitions } from './describe-producers-v0';
import { answeredAsDecoded, flexibleRequest, readFlexibleResponse, readStructs, writeStructs } from './flexible';
import { Encoder, type KafkajsProtocol } from './kafkajs-protocol';

export const WRITE_TXN_MARKERS_API_KEY = 27;

export interface TxnMarker {
  readonly producerId: string;
  readonly producerEpoch: number;
  /** true: COMMIT; false: ABORT. */
  readonly commit: boolean;
  readonly topics: readonly TopicPartitions[];
  readonly coordinatorEpoch: number;
}

export interface MarkerResult {
  readonly producerId: string;
  readonly topic: string;
  readonly partition: number;
  readonly errorCode: number;
}

export function writeTxnMarkersV1Request(markers: readonly TxnMarker[]) {
  return flexibleRequest({ apiKey: WRITE_TXN_MARKERS_API_KEY, apiVersion: 1, apiName: 'WriteTxnMarkers' }, (encoder) =>
    writeStructs(encoder, markers, (e, m) =>
      writeStructs(e.writeInt64(m.producerId).writeInt16(m.producerEpoch).writeInt8(m.commit ? 1 : 0), m.topics, (t, { topic, partitions }) =>
        t.writeUVarIntString(topic).writeUVarIntArray(partitions.map((p) => new Encoder().writeInt32(p))),
      ).writeInt32(m.coordinatorEpoch),
    ).writeUVarInt(0),
  );
}

export async function decodeWriteTxnMarkersV1Response(raw: Buffer): Promise<MarkerResult[]> {
  return readFlexibleResponse(raw, (decoder) => {
    const results: MarkerResult[] = [];
    readStructs(decoder, (m) => {
      const producerId = m.readInt64().toString();
      readStructs(m, (t) => {
        const topic = t.readUVarIntString() ?? '';
        readStructs(t, (p) => results.push({ producerId, topic, partition: p.readInt32(), errorCode: p.readInt16() }));
      });
    });
    decoder.readTaggedFields();
    return results;
  });
}

/** The request and how to read its answer; per-partition errors are in the answer, not thrown. */
export function writeTxnMarkersV1(markers: readonly TxnMarker[]): KafkajsProtocol<MarkerResult[]> {
  return answeredAsDecoded(writeTxnMarkersV1Request(markers), decodeWriteTxnMarkersV1Response);
}
