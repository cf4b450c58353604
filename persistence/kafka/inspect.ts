/** `inspect` of a Kafka flow: the latest snapshot of each key in its snapshot topics, read without a group or a fence. */
import type { BackendFlow, WorkerContext } from '../backends';
import type { InspectedKey, InspectFilter } from '../descriptor';
import { kafkaFlowBackend } from './factory';
import type { ResolvedKafkaPersistence } from './options';

export async function* inspectKafka(
  definition: BackendFlow<unknown, ResolvedKafkaPersistence>,
  filter: InspectFilter,
  worker: WorkerContext,
): AsyncIterable<InspectedKey> {
  const backend = kafkaFlowBackend(definition, worker);
  try {
    for await (const s of backend.readAll({ topic: filter.topic, partition: filter.partition })) {
      if (filter.key !== undefined && s.key !== filter.key) continue;
      yield { topic: s.topic, partition: s.partition, key: s.key, offset: s.offset, state: s.state };
    }
  } finally {
    await backend.close();
  }
}
