import { ConfigError } from '../../config/errors';
import type { FlowDefinition } from '../../define-flow';
import { brokersFromEnv } from '../../config/env';
import { readKafkaSecurity } from '../../config/security';
import { createKafkaClient, KafkaAdmin } from '../../kafka';
import type * as Cassandra from '../../persistence/cassandra';
import { kafkaFlowBackend } from '../../persistence/kafka/factory';

/** A persisted key as `inspect` prints it: one JSON line each. */
export interface InspectedKey {
  topic: string;
  partition: number;
  key: string;
  offset: string;
  state: unknown;
}

export interface InspectFilter {
  topic?: string;
  partition?: number;
  key?: string;
}

/** Reads a flow's persisted state from whichever backend it uses, without joining its group. */
export async function* inspectFlow(definition: FlowDefinition<unknown, unknown>, filter: InspectFilter = {}): AsyncIterable<InspectedKey> {
  const p = definition.persistence;
  if (p.mode === 'none') throw new ConfigError(`flow "${definition.name}" is transient (mode 'none'): it persists nothing`);
  if (p.backend === 'kafka') {
    const backend = kafkaFlowBackend(definition, { brokers: brokersFromEnv(), kafkaSecurity: readKafkaSecurity() });
    try {
      for await (const s of backend.readAll({ topic: filter.topic, partition: filter.partition })) {
        if (filter.key !== undefined && s.key !== filter.key) continue;
        yield { topic: s.topic, partition: s.partition, key: s.key, offset: s.offset, state: s.state };
      }
    } finally {
      await backend.close();
    }
    return;
  }
  if (p.backend === 'cassandra') {
    yield* inspectCassandra(definition, filter);
    return;
  }
  if (p.backend === 'memory') {
    throw new ConfigError(`flow "${definition.name}" uses the memory backend: its state lives inside each worker process and cannot be inspected`);
  }
  throw new ConfigError(`inspect does not support the ${(p as { backend: string }).backend} backend`);
}

/** Cassandra: each input partition's keys from the keys table, then their snapshots (recovery's path). */
async function* inspectCassandra(definition: FlowDefinition<unknown, unknown>, filter: InspectFilter): AsyncIterable<InspectedKey> {
  const admin = new KafkaAdmin(createKafkaClient({ brokers: brokersFromEnv(), clientId: 'kafka-flow-temporal-inspect', logLevel: 'nothing', security: readKafkaSecurity() }));
  // Required here: the Cassandra driver is loaded only by the commands that use it.
  const { CassandraBackend } = require('../../persistence/cassandra') as typeof Cassandra;
  const backend = await CassandraBackend.forFlow(definition);
  try {
    await admin.connect();
    for (const topic of definition.topics) {
      if (filter.topic !== undefined && topic !== filter.topic) continue;
      const count = (await admin.describeTopic(topic))?.partitions ?? 0;
      const partitions = filter.partition !== undefined ? [filter.partition] : Array.from({ length: count }, (_, p) => p);
      for (const partition of partitions) {
        const persistence = await backend.forPartition({ topic, partition, committer: { commit: async () => {} } });
        for await (const found of persistence.recover()) {
          if (filter.key !== undefined && found.key !== filter.key) continue;
          if (found.snapshot) yield { topic, partition, key: found.key, offset: String(found.snapshot.offset), state: found.snapshot.state };
        }
      }
    }
  } finally {
    await admin.close();
    await backend.close();
  }
}

