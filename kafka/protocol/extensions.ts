/**
 * The project's side of the kafkajs patch's hooks: the protocol code the patched kafkajs calls,
 * registered with its registry (`node_modules/kafkajs/src/protocol/extensions.js`) by name.
 * The project makes every kafkajs object that sends requests through kafka/client.ts (`newKafka`,
 * `createKafkaClient`) or kafka/internals.ts (`createCluster`), and those register them first, so
 * they are in place in every process that talks to Kafka (workers, the CLI and its child
 * processes, tests, benchmarks). A hook kafkajs calls before that throws
 * `KafkaJSExtensionNotRegisteredError`; nothing falls back.
 */
import { extensionRegistry, type KafkajsProtocol } from './kafkajs-protocol';
import { type OffsetFetchV7Args, type OffsetFetchV7Response, offsetFetchV7 } from './offset-fetch-v7';
import { type TxnOffsetCommitV3Args, type TxnOffsetCommitV3Response, txnOffsetCommitV3 } from './txn-offset-commit-v3';

/** The hooks, by the names the patched kafkajs calls them by. */
export interface KafkajsExtensions {
  /** TxnOffsetCommit version 3 (txnOffsetCommit/index.js). */
  txnOffsetCommitV3(args: TxnOffsetCommitV3Args): KafkajsProtocol<TxnOffsetCommitV3Response>;
  /** OffsetFetch version 7 (offsetFetch/index.js). */
  offsetFetchV7(args: OffsetFetchV7Args): KafkajsProtocol<OffsetFetchV7Response>;
}

export const kafkajsExtensions: KafkajsExtensions = {
  txnOffsetCommitV3,
  offsetFetchV7,
};

/** Registers the hooks with kafkajs; idempotent (called wherever a kafkajs client is made). */
export function registerKafkajsExtensions(): void {
  extensionRegistry.registerExtensions(kafkajsExtensions);
}
