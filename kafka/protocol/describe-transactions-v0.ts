/**
 * DescribeTransactions v0 (KIP-664), which kafkajs lacks: a transaction coordinator's state of
 * transactional ids — Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort,
 * PrepareEpochFence, Dead — with the producer id and epoch. What `kafka-transactions.sh describe`
 * shows. Sent to the ids' transaction coordinator.
 *
 * Request (Version: 0) => [transactional_ids] TAG_BUFFER
 * Response (Version: 0) => throttle_time_ms [transaction_states] TAG_BUFFER
 *   transaction_states => error_code transactional_id transaction_state transaction_timeout_ms
 *                         transaction_start_time_ms producer_id producer_epoch [topics] TAG_BUFFER
 *     topics => topic [partitions] TAG_BUFFER
 */
import { answeredAsDecoded, flexibleRequest, readFlexibleResponse, readStructs } from './flexible';
import { Encoder, type KafkajsProtocol } from './kafkajs-protocol';

export const DESCRIBE_TRANSACTIONS_API_KEY = 65;

export interface TransactionState {
  readonly errorCode: number;
  readonly transactionalId: string;
  readonly state: string;
  readonly producerId: string;
  readonly producerEpoch: number;
}

export function describeTransactionsV0Request(transactionalIds: readonly string[]) {
  return flexibleRequest({ apiKey: DESCRIBE_TRANSACTIONS_API_KEY, apiVersion: 0, apiName: 'DescribeTransactions' }, (encoder) =>
    encoder.writeUVarIntArray(transactionalIds.map((id) => new Encoder().writeUVarIntString(id))).writeUVarInt(0),
  );
}

export async function decodeDescribeTransactionsV0Response(raw: Buffer): Promise<TransactionState[]> {
  return readFlexibleResponse(raw, (decoder) => {
    decoder.readInt32(); // throttle time
    const states = readStructs(decoder, (d) => {
      const errorCode = d.readInt16();
      const transactionalId = d.readUVarIntString() ?? '';
      const state = d.readUVarIntString() ?? '';
      d.readInt32(); // transaction timeout
      d.readInt64(); // transaction start time
      const producerId = d.readInt64().toString();
      const producerEpoch = d.readInt16();
      readStructs(d, (t) => {
        t.readUVarIntString();
        t.readUVarIntArray((p) => p.readInt32());
      });
      return { errorCode, transactionalId, state, producerId, producerEpoch };
    });
    decoder.readTaggedFields();
    return states;
  });
}

/** The request and how to read its answer; per-id errors are in the answer, not thrown. */
export function describeTransactionsV0(transactionalIds: readonly string[]): KafkajsProtocol<TransactionState[]> {
  return answeredAsDecoded(describeTransactionsV0Request(transactionalIds), decodeDescribeTransactionsV0Response);
}
