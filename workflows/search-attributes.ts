import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * Custom search attributes of partition workflows: in the Temporal UI a user filters to one flow
 * (`KafkaFlow = "sales"`) and sees each partition's owner and phase. `infra up` registers them.
 * (`Partition` is a keyword of Temporal's list-filter language, hence the `Kafka` prefix.)
 */
export const searchAttributes = {
  flow: defineSearchAttributeKey('KafkaFlow', SearchAttributeType.KEYWORD),
  topic: defineSearchAttributeKey('KafkaTopic', SearchAttributeType.KEYWORD),
  partition: defineSearchAttributeKey('KafkaPartition', SearchAttributeType.INT),
  generation: defineSearchAttributeKey('KafkaGeneration', SearchAttributeType.INT),
  owner: defineSearchAttributeKey('KafkaOwner', SearchAttributeType.KEYWORD),
  phase: defineSearchAttributeKey('KafkaFlowPhase', SearchAttributeType.KEYWORD),
} as const;
