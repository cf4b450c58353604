// Restore of one Cassandra partition with local state (docs/local-state.md#cassandra-persistence)
// vs without, on the local Cassandra and Kafka.
//
// 100,000 keys (≈ 100-byte states) are written to one partition through the Cassandra backend
// with local state on (kafka-flow layout, fencing 'timestamp' for a quick seed — the restore reads
// the same tables whatever the fence), 1,000 keys per batch, each batch's offset committed by a
// real group member with the store's lineage. Then, interleaved, 3 times each (median), each a
// fresh partition persistence timed from `forPartition` to the last key recovered:
//   - restart onto the intact store, every key loaded from it (`fromLocal`);
//   - restart onto the intact store with keys read on demand (a bounded state cache): nothing loaded;
//   - restart without local state: the keys listed from the keys table and read from Cassandra.
// `cassandra_restore_keys_read_with_local` must be 0.
//
// `npm run bench:cassandra-restore [-- --quick]` (quick: 10,000 keys, 1 run).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'cassandra-driver';
import { isQuick, sized } from './lib/args';
import { writeResults } from './lib/results';
import { printTable } from './lib/table';
import { median } from './lib/timing';
import { brokersFromEnv, formatHostPort, readEnv } from '../config/env';
import { CommittedOffsets, createKafkaClient, GroupMembership, KafkaAdmin } from '../kafka';
import { CassandraBackend } from '../persistence/cassandra';
import { ConsumerOffsetCommitter } from '../persistence/cassandra/consumer-offset-committer';
import type { KeyWrite } from '../flow/ports';
import { VERSIONS } from '../infra/settings';

const KEYS = sized(100_000, 10_000);
const RUNS = sized(3, 1);
const BATCH = 1_000;

type State = { n: number; note: string };

async function main(): Promise<void> {
  const contactPoints = readEnv().cassandraContactPoints.map(formatHostPort);
  const run = `bench-cassandra-restore-${Date.now().toString(36)}`;
  const keyspace = `bench_cassandra_restore_${Date.now()}`;
  const topic = `${run}-input`;
  const groupId = `${run}-group`;
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-bench-cassandra-restore-'));
  const dir = path.join(root, 'state');
  const client = createKafkaClient({ brokers: brokersFromEnv(), clientId: 'bench-cassandra-restore', logLevel: 'error' });
  const admin = new KafkaAdmin(client);
  await admin.ensureTopics([{ topic, partitions: 1 }]);
  // A joined member commits the offsets (with the store's lineage as their metadata).
  const consumer = client.kafka.consumer({ groupId, sessionTimeout: 30_000, heartbeatInterval: 1_000 });
  const membership = new GroupMembership();
  membership.attach(consumer);
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({ autoCommit: false, eachBatch: async () => {} });
  await membership.waitForJoin(60_000);
  const generation = membership.current()!.generationId;
  const committer = new ConsumerOffsetCommitter({ consumer, membership });
  const offsets = new CommittedOffsets(client);
  const committed = async () => (await offsets.positions(groupId, topic, [0])).get(0) ?? undefined;
  const backend = await CassandraBackend.start<State, unknown>({ applicationId: 'bench', groupId, keyspace, contactPoints, fencing: 'timestamp' });
  const partition = (local: 'none' | 'load' | 'on-demand') =>
    backend.forPartition({
      topic,
      partition: 0,
      generation,
      committer,
      ...(local === 'none' ? {} : { localState: { dir, onDemand: local === 'on-demand' }, committed }),
    });
  try {
    // Seed through the backend with local state on: every batch to the store, then Cassandra, then the commit.
    const seed = await partition('load');
    for await (const _ of seed.recover());
    const seeding = performance.now();
    for (let from = 0; from < KEYS; from += BATCH) {
      const writes: KeyWrite<State, unknown>[] = [];
      for (let i = from; i < Math.min(KEYS, from + BATCH); i++) writes.push({ key: `key${i}`, snapshot: { state: { n: i, note: `key ${i} of the Cassandra restore benchmark` }, offset: i }, addKey: true });
      const result = await seed.write({ writes, commitOffset: from + writes.length });
      if (!result.committed) throw new Error(`the seed batch at ${from} was not committed: ${String(result.commitError)}`);
    }
    await seed.close();
    process.stdout.write(`seeded ${KEYS} keys in ${Math.round(performance.now() - seeding)} ms\n`);

    const restore = async (local: 'none' | 'load' | 'on-demand') => {
      const started = performance.now();
      const p = await partition(local);
      let yielded = 0;
      for await (const _ of p.recover()) yielded++;
      const ms = performance.now() - started;
      const r = p.lastRecovery!;
      await p.close();
      return { ms, yielded, fromLocal: r.fromLocal ?? 0, fromCassandra: local === 'none' ? r.keysRecovered : (r.fromTopic ?? 0), restore: r.restore };
    };
    const loaded: Awaited<ReturnType<typeof restore>>[] = [];
    const onDemand: Awaited<ReturnType<typeof restore>>[] = [];
    const full: Awaited<ReturnType<typeof restore>>[] = [];
    for (let r = 0; r < RUNS; r++) {
      loaded.push(await restore('load'));
      onDemand.push(await restore('on-demand'));
      full.push(await restore('none'));
    }
    for (const x of [...loaded, ...onDemand]) if (x.restore !== 'delta' || x.fromCassandra !== 0) throw new Error(`a restart onto the intact store read Cassandra: ${JSON.stringify(x)}`);
    for (const x of [...loaded, ...full]) if (x.yielded !== KEYS) throw new Error(`restored ${x.yielded} keys, expected ${KEYS}`);
    if (onDemand.some((x) => x.yielded !== 0)) throw new Error('a restore with keys on demand yielded keys');
    const ms = (xs: { ms: number }[]) => median(xs.map((x) => x.ms));
    printTable(`Restore of one Cassandra partition, ${KEYS} keys (median of ${RUNS})`, [
      { restart: 'intact local state, every key loaded', ms: Math.round(ms(loaded)), 'keys read from Cassandra': loaded[0]!.fromCassandra, 'keys from local state': loaded[0]!.fromLocal },
      { restart: 'intact local state, keys on demand', ms: Math.round(ms(onDemand)), 'keys read from Cassandra': onDemand[0]!.fromCassandra, 'keys from local state': 0 },
      { restart: 'no local state', ms: Math.round(ms(full)), 'keys read from Cassandra': full[0]!.fromCassandra, 'keys from local state': 0 },
    ]);
    const figures = {
      cassandra_restore_keys_read_with_local: loaded[0]!.fromCassandra,
      cassandra_restore_keys_read_without: full[0]!.fromCassandra,
      cassandra_restore_with_local_ms: Math.round(ms(loaded)),
      cassandra_restore_on_demand_ms: Math.round(ms(onDemand)),
      cassandra_restore_without_ms: Math.round(ms(full)),
      cassandra_restore_full_vs_local: Math.round((ms(full) / ms(loaded)) * 100) / 100,
      cassandra_restore_full_vs_on_demand: Math.round((ms(full) / ms(onDemand)) * 100) / 100,
    };
    printTable('Figures', Object.entries(figures).map(([figure, value]) => ({ figure, value })));
    const file = writeResults('cassandra-restore', figures, {
      versions: { cassandra: VERSIONS.cassandra, kafka: VERSIONS.kafka, lmdb: JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'node_modules', 'lmdb', 'package.json'), 'utf8')).version },
      notes: {
        keys: KEYS,
        runs: RUNS,
        statistic: 'median',
        batch: BATCH,
        timed: 'forPartition to the last key recovered (its committed offset read included)',
        layout: "kafka-flow (keys table + snapshots_v2), fencing 'timestamp' for the seed",
        quick: isQuick(),
        servers: 'one local Cassandra node and one local KRaft broker',
      },
    });
    process.stdout.write(`results: ${file}\n`);
  } finally {
    await backend.close().catch(() => undefined);
    await offsets.close().catch(() => undefined);
    await consumer.disconnect().catch(() => undefined);
    await admin.deleteTopics([topic]).catch(() => undefined);
    await admin.close();
    const cql = new Client({ contactPoints, localDataCenter: 'datacenter1' });
    await cql.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`).catch(() => undefined);
    await cql.shutdown().catch(() => undefined);
    fs.rmSync(root, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
