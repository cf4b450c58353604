import type { JournalEvent } from '../core/persistence-types';

/** Kafka headers as kafkajs delivers them. */
export type RecordHeaders = Readonly<Record<string, Buffer | string | (Buffer | string)[] | undefined>>;

/**
 * One input record as the user's fold sees it. `offset` and `timestamp` are strings, as kafkajs
 * gives them. A record without a value (a tombstone) arrives with `value === null`: declare the
 * value type as `T | null` if the topic has tombstones.
 */
export interface FlowRecord<V> extends JournalEvent<V> {
  readonly headers: RecordHeaders;
}

/** An input message as kafkajs's `eachBatch` hands it over (only the fields the engine reads). */
export interface InputMessage {
  readonly offset: string;
  readonly key: Buffer | string | null;
  readonly value: Buffer | null;
  readonly timestamp: string;
  readonly headers?: RecordHeaders;
  /**
   * Set by the flow's fetch decoder (kafka/fetch-decoder.ts, FetchedRecord): the fetch response
   * `key` and `value` are views of, and where ([keyStart, keyEnd), [valueStart, valueEnd); an end
   * of -1 is null). The engine then reads the key's text and decodes the value straight from it
   * (the codec's `decodeFrom`), without a Buffer view per record, and takes `offsetNumber` as it is.
   */
  readonly bytes?: Buffer;
  /** Set with `bytes`: the offset as a number (a safe integer ≥ 0). */
  readonly offsetNumber?: number;
  readonly keyStart?: number;
  readonly keyEnd?: number;
  readonly valueStart?: number;
  readonly valueEnd?: number;
}
