/**
 * The project's side of the kafkajs patch's hooks: the protocol code the patched kafkajs calls,
 * registered with its registry (`node_modules/kafkajs/src/protocol/extensions.js`) by name.
 * The project makes every kafkajs object that sends requests through kafka/client.ts (`newKafka`,
 * `createKafkaClient`) or kafka/internals.ts (`createCluster`), and those register them first, so
 * they are in place in every process that talks to Kafka (workers, the CLI and its child
 * processes, tests, benchmarks). A hook kafkajs calls before that throws
 * `KafkaJSExtensionNotRegisteredError`; nothing falls back.
 */
import { type ApiVersionsV3Response, apiVersionsV3 } from './api-versions-v3';
import { type EndTxnV5Args, type EndTxnV5Response, endTxnV5 } from './end-txn-v5';
import { type OffsetFetchV7Args, type OffsetFetchV7Response, offsetFetchV7 } from './offset-fetch-v7';
import { encoderHolding, extensionRegistry, type KafkajsEncoder, type KafkajsProtocol } from './kafkajs-protocol';
import { plainTopicData } from './plain-message';
import { type ProduceV12Response, produceV12 } from './produce-v12';
import { type ProduceRequestBody, writeProduceBody } from './produce-writer';
import { encodeRecord, type RecordFields } from './record-v0';
import { speaksTransactionVersion2, type VersionsWithFeatures } from './transaction-version';
import { type TxnOffsetCommitV3Args, type TxnOffsetCommitV3Response, txnOffsetCommitV3, txnOffsetCommitV5 } from './txn-offset-commit-v3';

type TopicData = ProduceRequestBody['topicData'][number];

/** The hooks, by the names the patched kafkajs calls them by. */
export interface KafkajsExtensions {
  /** Produce v3-v7 (produce/v3/request.js): the body in one buffer, or undefined to leave it to kafkajs's encoders. */
  writeProduceBody(body: ProduceRequestBody): Promise<KafkajsEncoder | undefined>;
  /** Produce v3-v7, for kafkajs's encoders: records encoded already made plain. */
  plainTopicData(topicData: readonly TopicData[]): TopicData[];
  /** Produce v3-v7, for kafkajs's encoders: one record. */
  encodeRecord(fields: RecordFields): KafkajsEncoder;
  /** TxnOffsetCommit version 3 (txnOffsetCommit/index.js). */
  txnOffsetCommitV3(args: TxnOffsetCommitV3Args): KafkajsProtocol<TxnOffsetCommitV3Response>;
  /** OffsetFetch version 7 (offsetFetch/index.js). */
  offsetFetchV7(args: OffsetFetchV7Args): KafkajsProtocol<OffsetFetchV7Response>;
  /** ApiVersions version 3 (apiVersions/index.js): the versions and the cluster's finalized features. */
  apiVersionsV3(): KafkajsProtocol<ApiVersionsV3Response>;
  /** Transaction version 2 (KIP-890 part 2), sent only when asked for: Produce v12 (produce/index.js). */
  produceV12(body: Omit<ProduceRequestBody, 'flexible'>): KafkajsProtocol<ProduceV12Response>;
  /** … TxnOffsetCommit v5 (txnOffsetCommit/index.js). */
  txnOffsetCommitV5(args: TxnOffsetCommitV3Args): KafkajsProtocol<TxnOffsetCommitV3Response>;
  /** … EndTxn v5 (endTxn/index.js). */
  endTxnV5(args: EndTxnV5Args): KafkajsProtocol<EndTxnV5Response>;
  /** Whether a broker's versions (with the cluster's finalized features) speak transaction version 2 (producer/eosManager). */
  speaksTransactionVersion2(versions: VersionsWithFeatures | undefined): boolean;
}

export const kafkajsExtensions: KafkajsExtensions = {
  writeProduceBody: async (body) => {
    const bytes = await writeProduceBody(body);
    return bytes && encoderHolding(bytes);
  },
  plainTopicData,
  encodeRecord,
  txnOffsetCommitV3,
  offsetFetchV7,
  apiVersionsV3,
  produceV12,
  txnOffsetCommitV5,
  endTxnV5,
  speaksTransactionVersion2,
};

/** Registers the hooks with kafkajs; idempotent (called wherever a kafkajs client is made). */
export function registerKafkajsExtensions(): void {
  extensionRegistry.registerExtensions(kafkajsExtensions);
}
