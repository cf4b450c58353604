import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Custom search attributes of partition workflows: in the Temporal UI a user filters to one flow
 * (`KafkaFlow = "sales"`) and sees each partition's phase, owner, generation, lag and keys as
 * columns. `infra up` registers them. (`Partition` is a keyword of Temporal's list-filter
 * language, hence the `Kafka` prefix.) Lag and keys are coarse (workflows/partition/console.ts);
 * keys is a Double because SQL visibility, the dev server's, allows only three Int attributes.
 */
export const searchAttributes = {
  flow: defineSearchAttributeKey('KafkaFlow', SearchAttributeType.KEYWORD),
  topic: defineSearchAttributeKey('KafkaTopic', SearchAttributeType.KEYWORD),
  partition: defineSearchAttributeKey('KafkaPartition', SearchAttributeType.INT),
  generation: defineSearchAttributeKey('KafkaGeneration', SearchAttributeType.INT),
  owner: defineSearchAttributeKey('KafkaOwner', SearchAttributeType.KEYWORD),
  phase: defineSearchAttributeKey('KafkaFlowPhase', SearchAttributeType.KEYWORD),
  lag: defineSearchAttributeKey('KafkaLag', SearchAttributeType.INT),
  keys: defineSearchAttributeKey('KafkaKeys', SearchAttributeType.DOUBLE),
} as const;
