/**
 * EndTxn v5 (KIP-890 part 2, transaction version 2), which kafkajs 2.2.4 lacks (it stops at v1); the
 * patch registers it as version 5 of its EndTxn request, calling `endTxnV5` here, and sends it only
 * for a producer on transaction version 2 (kafka/transaction-version.ts): v5 tells the coordinator
 * the client speaks that protocol, and the coordinator then bumps the producer epoch at the end of
 * every transaction and answers with the producer id and epoch the next transaction must use.
 *
 * Request (Version: 5) => transactional_id producer_id producer_epoch committed TAG_BUFFER
 *   transactional_id => COMPACT_STRING
 *   producer_id => INT64
 *   producer_epoch => INT16
 *   committed => BOOLEAN
 *
 * Response (Version: 5) => throttle_time_ms error_code producer_id producer_epoch TAG_BUFFER
 *   throttle_time_ms => INT32
 *   error_code => INT16
 *   producer_id => INT64
 *   producer_epoch => INT16
 *
 * The producer id changes when the epoch would overflow (the coordinator allocates a new one).
 * New errors since v1: PRODUCER_FENCED (90, v2+), TRANSACTION_ABORTABLE (120, v4+).
 */
import { flexibleRequest, readFlexibleResponse } from './flexible';
import { API_KEYS, type Int64, type KafkajsProtocol, type KafkajsRequest, parseEndTxn } from './kafkajs-protocol';

export interface EndTxnV5Args {
  transactionalId: string;
  producerId: Int64;
  producerEpoch: number;
  /** true: commit; false: abort. */
  transactionResult: boolean;
}

export interface EndTxnV5Response {
  /** 0: the broker's throttle time is in `clientSideThrottleTime` (kafkajs's convention from v1 on). */
  throttleTime: 0;
  clientSideThrottleTime: number;
  errorCode: number;
  /** The producer id and epoch for the next transaction (-1 / -1 with an error). */
  producerId: string;
  producerEpoch: number;
}

export function endTxnV5Request({ transactionalId, producerId, producerEpoch, transactionResult }: EndTxnV5Args): KafkajsRequest {
  return flexibleRequest({ apiKey: API_KEYS.EndTxn, apiVersion: 5, apiName: 'EndTxn' }, (encoder) =>
    encoder
      .writeUVarIntString(transactionalId)
      .writeInt64(producerId)
      .writeInt16(producerEpoch)
      .writeInt8(transactionResult ? 1 : 0)
      .writeUVarInt(0),
  );
}

export async function decodeEndTxnV5Response(raw: Buffer): Promise<EndTxnV5Response> {
  return readFlexibleResponse(raw, (decoder) => {
    const throttleTime = decoder.readInt32();
    const errorCode = decoder.readInt16();
    const producerId = decoder.readInt64().toString();
    const producerEpoch = decoder.readInt16();
    decoder.readTaggedFields();
    return { throttleTime: 0, clientSideThrottleTime: throttleTime, errorCode, producerId, producerEpoch };
  });
}

/** Version 5 of kafkajs's EndTxn for one call: the request and how to read its answer. */
export function endTxnV5(args: EndTxnV5Args): KafkajsProtocol<EndTxnV5Response> {
  return {
    request: endTxnV5Request(args),
    response: { decode: decodeEndTxnV5Response, parse: parseEndTxn },
  };
}
