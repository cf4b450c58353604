/** `inspect` of a Cassandra flow: each input partition's keys from the keys table, then their snapshots (recovery's path). */
import { createKafkaClient } from '../../kafka/client';
import { KafkaAdmin } from '../../kafka/admin';
import { offsetText } from '../../flow/offsets';
import type { BackendFlow, WorkerContext } from '../backends';
import type { InspectedKey, InspectFilter } from '../descriptor';
import { CassandraBackend } from './backend';
import type { ResolvedCassandraPersistence } from './options';

export async function* inspectCassandra(
  definition: BackendFlow<unknown, ResolvedCassandraPersistence>,
  filter: InspectFilter,
  worker: WorkerContext,
): AsyncIterable<InspectedKey> {
  // The admin lists each input topic's partitions: the keys table is read partition by partition.
  const admin = new KafkaAdmin(createKafkaClient({ brokers: worker.brokers, clientId: 'kafka-flow-temporal-inspect', logLevel: 'nothing', security: worker.kafkaSecurity }));
  const backend = await CassandraBackend.forFlow(definition);
  try {
    await admin.connect();
    for (const topic of definition.topics) {
      if (filter.topic !== undefined && topic !== filter.topic) continue;
      // The keys table is read by the input's partitions: without the topic there is nothing to
      // list them by, and an empty answer would read as a flow without state.
      const described = await admin.describeTopic(topic);
      if (!described) throw new RangeError(`input topic "${topic}" of flow "${definition.name}" does not exist on ${worker.brokers.join(',')}: its partitions are what inspect reads the keys table by`);
      const count = described.partitions;
      const partitions = filter.partition !== undefined ? [filter.partition] : Array.from({ length: count }, (_, p) => p);
      for (const partition of partitions) {
        const persistence = await backend.forPartition({ topic, partition, committer: { commit: async () => {} } });
        for await (const found of persistence.recover()) {
          if (filter.key !== undefined && found.key !== filter.key) continue;
          if (found.snapshot) yield { topic, partition, key: found.key, offset: offsetText(found.snapshot.offset), state: found.snapshot.state };
        }
      }
    }
  } finally {
    await admin.close();
    await backend.close();
  }
}
