import { KafkaAdmin } from '../../kafka/admin';
import { createKafkaClient } from '../../kafka/client';
import { PlainWriter } from '../../kafka/plain-writer';
import type { BackendFlow, PersistenceBackend, WorkerContext } from '../backends';
import { OutputProducer, OutputTopics } from '../kafka/dead-letter';
import { CassandraBackend } from './backend';
import { lockStateDir } from '../kafka/state-dir-lock';
import { localStateRefusal, type ResolvedCassandraPersistence } from './options';
import type { CassandraPartitionPersistence } from './partition-persistence';
import { readStoredCoverage } from './local-state';

/**
 * The `cassandra` backend (docs/cassandra.md): started on first use (connect, check or create the
 * schema); snapshot writes fenced by LWT on (generation, offset); offsets committed by the consumer.
 */
export function cassandraBackend<S, V>(
  definition: BackendFlow<V>,
  worker: Pick<WorkerContext, 'brokers' | 'kafkaSecurity' | 'logger' | 'metrics' | 'stateDir' | 'keysOnDemand'>,
): PersistenceBackend<S, V> {
  const localState = cassandraLocalStateOf(definition, worker);
  // One worker process per state directory: throws StateDirLockedError; released by close().
  const lock = localState ? lockStateDir(localState.dir) : undefined;
  /** Each partition's persistence, closed (its local store) when the partition is revoked for good. */
  const partitions = new Map<string, CassandraPartitionPersistence<S, V>>();
  // For the assignor's first join: how far the stores this worker's previous run left go.
  let onDisk: Record<string, Record<string, string>> = {};
  if (localState) {
    void readStoredCoverage(localState.dir, { flow: definition.name, groupId: definition.groupId }, definition.topics).then((found) => {
      onDisk = found;
    });
  }
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
      const persistence = await (await backend()).forPartition({
        topic: owner.topic,
        partition: owner.partition,
        generation: owner.assigned.generationId,
        committer: owner,
        outputs: dead?.producer,
        ...(localState ? { localState, committed: () => (owner.committed ? owner.committed() : Promise.resolve(undefined)) } : {}),
      });
      if (localState) partitions.set(`${owner.topic}-${owner.partition}`, persistence);
      return persistence;
    },
    localCheckpoints: () => {
      const out: Record<string, Record<string, string>> = {};
      for (const [topic, byPartition] of Object.entries(onDisk)) out[topic] = { ...byPartition };
      for (const p of partitions.values()) {
        const c = p.localCoverage;
        if (c === undefined) continue;
        out[p.partition.topic] = { ...out[p.partition.topic], [String(p.partition.partition)]: c };
      }
      return out;
    },
    release: async (tp) => {
      const p = partitions.get(`${tp.topic}-${tp.partition}`);
      partitions.delete(`${tp.topic}-${tp.partition}`);
      await p?.close();
    },
    close: async () => {
      await dead?.close();
      for (const p of partitions.values()) await p.close().catch(() => undefined);
      partitions.clear();
      if (started) await (await started.catch(() => undefined))?.close();
      lock?.release();
    },
  };
}

/**
 * persistence.localState, or KFT_STATE_DIR (which turns it on for the flows that can keep it —
 * mode 'snapshots', a generation fence, no snapshot TTL — and overrides the dir).
 */
function cassandraLocalStateOf(definition: Pick<BackendFlow<unknown>, 'name' | 'persistence'>, worker: Pick<WorkerContext, 'logger' | 'stateDir' | 'keysOnDemand'>): { dir: string; onDemand: boolean } | undefined {
  const p = definition.persistence as unknown as ResolvedCassandraPersistence;
  const onDemand = worker.keysOnDemand === true;
  if (worker.stateDir) {
    const refused = localStateRefusal(p);
    if (!refused) return { dir: worker.stateDir, onDemand };
    worker.logger?.warn({ flow: definition.name, reason: refused }, `KFT_STATE_DIR ignored: ${refused}`);
    return undefined;
  }
  return p.localState ? { dir: p.localState.dir, onDemand } : undefined;
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
