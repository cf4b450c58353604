import { KafkaAdmin } from '../../kafka/admin';
import { createKafkaClient } from '../../kafka/client';
import { PlainWriter } from '../../kafka/plain-writer';
import type { BackendFlow, PersistenceBackend, WorkerContext } from '../backends';
import { OutputProducer, OutputTopics } from '../kafka/dead-letter';
import { CassandraBackend } from './backend';

/**
 * The `cassandra` backend (docs/cassandra.md): started on first use (connect, check or create the
 * schema); snapshot writes fenced by LWT on (generation, offset); offsets committed by the consumer.
 */
export function cassandraBackend<S, V>(definition: BackendFlow<V>, worker: Pick<WorkerContext, 'brokers' | 'kafkaSecurity' | 'logger' | 'metrics'>): PersistenceBackend<S, V> {
  let started: Promise<CassandraBackend<S, V>> | undefined;
  const backend = () => {
    // A failed start (Cassandra unreachable, schema not answerable) is not kept: the next
    // assignment or retry of recovery connects again, so a worker that started while Cassandra
    // was down heals once it is back.
    started ??= CassandraBackend.forFlow<S, V>(definition, { logger: worker.logger, metrics: worker.metrics }).catch((err: unknown) => {
      started = undefined;
      throw err;
    });
    return started;
  };
  // Dead letters and emitted records: produced before the writes that pass their records (at least once).
  const dead =
    definition.deadLetterTopics || definition.outputTopics.length > 0
      ? plainOutputs(definition, definition.deadLetterTopics ?? {}, definition.outputTopics, worker)
      : undefined;
  return {
    forPartition: async (owner) => {
      await dead?.ensure(owner.topic);
      // Fenced by the generation of the assignment (LWT); offsets committed through the owner.
      return (await backend()).forPartition({ topic: owner.topic, partition: owner.partition, generation: owner.assigned.generationId, committer: owner, outputs: dead?.producer });
    },
    close: async () => {
      await dead?.close();
      if (started) await (await started.catch(() => undefined))?.close();
    },
  };
}

/** A plain producer of dead letters and emitted records for a backend without Kafka transactions (Cassandra). */
function plainOutputs(
  definition: Pick<BackendFlow<unknown>, 'name'>,
  topics: Readonly<Record<string, string>>,
  outputTopics: readonly string[],
  worker: Pick<WorkerContext, 'brokers' | 'kafkaSecurity' | 'logger'>,
) {
  const client = createKafkaClient({
    brokers: worker.brokers,
    clientId: `kafka-flow-temporal-${definition.name}-outputs`,
    security: worker.kafkaSecurity,
    logger: worker.logger,
  });
  const admin = new KafkaAdmin(client);
  const outputs = new OutputTopics(admin);
  const ensureOutput = (topic: string, partitions: number) => outputs.ensure(topic, partitions);
  const writer = new PlainWriter({ client });
  return {
    producer: new OutputProducer(outputs, writer),
    async ensure(inputTopic: string) {
      const wanted = [...(topics[inputTopic] ? [topics[inputTopic]] : []), ...outputTopics];
      if (wanted.length === 0) return;
      const input = await admin.describeTopic(inputTopic);
      for (const topic of wanted) await ensureOutput(topic, input?.partitions ?? 1);
    },
    async close() {
      await writer.close().catch(() => undefined);
      await admin.close().catch(() => undefined);
    },
  };
}
