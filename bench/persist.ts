// kafka-flow's published transactional-snapshot experiments (docs/kafka-single-writer-design.md,
// "Measurements"), reproduced with this project's Kafka snapshot backend and engine on the local
// broker. Ratios are measured within one run.
//
// Experiment B — the post-assignment wave: 2,000 keys with 10 KiB snapshots, all dirty, flushed at
// once by the engine (PartitionFlow.persist), which hands the backend batches of
// maxWritesPerTransaction writes, each one transaction with the offset commit. Baseline: caching
// mode (the plain shared producer, then the consumer's offset commit). kafka-flow measured plain
// 282 ms, cap 256 300 ms (1.06×), cap 16 513 ms (1.8×), cap 1 4,002 ms (14.2×). As there, each
// configuration runs on a fresh snapshot topic after one untimed warm-up write, the configurations
// are interleaved, and each figure is the minimum of 3 runs (after one discarded warm-up burst).
// The state is kafka-flow's "x" × 10,240 with compression off, so 10 KiB go on the wire.
//
// Experiment A — 500 keys with small snapshots, written one at a time (each write awaited before
// the next, so nothing batches): one transaction each. kafka-flow: ≈ 1.8 ms per transaction. For
// reference, the same writes on the plain producer one at a time, and all 500 in one flush; and the
// anchor: the Java client (kafka-clients, the broker's version) writing the same transactions one at
// a time on the same broker (expA_java_ms_per_txn, expA_vs_java = ours ÷ Java's).
//
// `npm run bench:persist [-- --quick]` (quick: 400 keys, 100 sequential writes, 1 run).
import { Registry } from 'prom-client';
import { type JavaTransactionsResult, runJavaTransactions, STREAMS_VERSION } from './lib/anchors';
import { sized } from './lib/args';
import { startProgress } from './lib/progress';
import { writeResults } from './lib/results';
import { printTable } from './lib/table';
import { measure, ratio } from './lib/timing';
import { createPartitionFlow } from '../flow/create-partition-flow';
import { defineFlow } from '../define-flow';
import { FlowMetrics } from '../flow/metrics';
import type { InputMessage } from '../flow/record';
import { createKafkaClient, GroupMembership, KafkaAdmin, type KafkaClient } from '../kafka';
import { brokersFromEnv } from '../config/env';
import { KafkaSnapshotBackend } from '../persistence/kafka';
import type { KafkaPartitionPersistence } from '../persistence/kafka';

const BURST = sized(2_000, 400);
const SEQUENTIAL = sized(500, 100);
const RUNS = sized(3, 1);
const PAYLOAD = 'x'.repeat(10_240);

type State = string;

interface Shared {
  client: KafkaClient;
  admin: KafkaAdmin;
  input: string;
  groupId: string;
  membership: GroupMembership;
  commit: (offset: number) => Promise<void>;
  topics: string[];
}

const definition = defineFlow<State, string>({
  name: 'bench-persist',
  groupId: 'bench-persist',
  topics: ['bench-persist'],
  fold: (_state, record) => record.value,
  valueCodec: { encode: (s) => Buffer.from(s), decode: (b) => b.toString('utf8') },
  timers: { persistPeriodically: {} },
});

let topicSeq = 0;

/** A backend on a fresh snapshot topic, and its partition-0 persistence, warmed by one write. */
async function fresh(s: Shared, mode: { transactional: false } | { transactional: true; cap: number }) {
  const snapshotTopic = `${s.input}-snapshots-${++topicSeq}`;
  s.topics.push(snapshotTopic);
  const backend = new KafkaSnapshotBackend<State, string>({
    client: s.client,
    flowName: 'bench-persist',
    groupId: s.groupId,
    inputTopic: s.input,
    snapshotTopic,
    transactionalIdPrefix: `${snapshotTopic}-tx`,
    transactional: mode.transactional,
    maxWritesPerTransaction: mode.transactional ? mode.cap : undefined,
    compressionThreshold: Number.POSITIVE_INFINITY,
  });
  await backend.ensureTopic(1);
  const persistence = await backend.forPartition({
    topic: s.input,
    partition: 0,
    generation: () => s.membership.current(),
    committer: { commit: (_tp, offset) => s.commit(offset) },
    assignedOffset: 0,
  });
  await persistence.write({ writes: [{ key: 'warm-up', snapshot: { state: PAYLOAD, offset: 0 } }] });
  return { backend, persistence };
}

function burstMessages(n: number, value: string): InputMessage[] {
  const v = Buffer.from(value);
  return Array.from({ length: n }, (_, i) => ({ offset: String(i), key: Buffer.from(`key${i}`), value: v, timestamp: '0' }));
}

/** Experiment B, one run: the engine flushes BURST dirty keys at once; returns ms and transactions. */
async function burst(s: Shared, mode: { transactional: false } | { transactional: true; cap: number }) {
  const { backend, persistence } = await fresh(s, mode);
  try {
    const flow = createPartitionFlow(definition, {
      topic: s.input,
      partition: 0,
      assignedAt: '0',
      persistence,
      metrics: FlowMetrics.of(new Registry()),
    });
    await flow.recover();
    await flow.handleBatch(burstMessages(BURST, PAYLOAD));
    const before = persistence.stats.transactions;
    let written = 0;
    const ms = await measure(async () => {
      const result = await flow.persist(Date.now(), 'shutdown');
      written = result.written;
      if (result.failed > 0 || result.committed !== BURST) throw new Error(`flush failed: ${JSON.stringify(result)}`);
    });
    if (written !== BURST) throw new Error(`${written} of ${BURST} keys written`);
    let stored = 0;
    for await (const _ of backend.readAll(0)) stored++;
    if (stored !== BURST + 1) throw new Error(`${stored} snapshots read back, expected ${BURST + 1}`);
    return { ms, transactions: persistence.stats.transactions - before };
  } finally {
    await backend.close();
  }
}

/** Experiment A: SEQUENTIAL single-key writes, each awaited (one transaction each when transactional). */
async function oneAtATime(persistence: KafkaPartitionPersistence<State, string>): Promise<number> {
  return measure(async () => {
    for (let i = 1; i <= SEQUENTIAL; i++) {
      await persistence.write({ writes: [{ key: `key${i}`, snapshot: { state: `state${i}`, offset: i } }] });
    }
  });
}

async function main(): Promise<void> {
  const client = createKafkaClient({ brokers: brokersFromEnv(), clientId: 'bench-persist', logLevel: 'error' });
  const admin = new KafkaAdmin(client);
  const run = `bench-persist-${Date.now().toString(36)}`;
  const s: Shared = {
    client,
    admin,
    input: `${run}-input`,
    groupId: `${run}-group`,
    membership: new GroupMembership(),
    commit: async () => {},
    topics: [],
  };
  s.topics.push(s.input);
  await admin.ensureTopics([{ topic: s.input, partitions: 1 }]);
  // One joined consumer, heartbeating throughout, gives every transaction a real generation and
  // commits the plain producer's offsets (as kafka-flow's experiment does).
  const consumer = client.kafka.consumer({ groupId: s.groupId, sessionTimeout: 30_000, heartbeatInterval: 1_000 });
  s.membership.attach(consumer);
  await consumer.connect();
  await consumer.subscribe({ topic: s.input, fromBeginning: true });
  await consumer.run({ autoCommit: false, eachBatch: async () => {} });
  await s.membership.waitForJoin(60_000);
  s.commit = (offset) => consumer.commitOffsets([{ topic: s.input, partition: 0, offset: String(offset) }]);

  try {
    const configs = [
      { name: 'plain', mode: { transactional: false } as const },
      { name: 'cap256', mode: { transactional: true, cap: 256 } as const },
      { name: 'cap16', mode: { transactional: true, cap: 16 } as const },
      { name: 'cap1', mode: { transactional: true, cap: 1 } as const },
      { name: `cap${BURST}`, mode: { transactional: true, cap: BURST } as const },
    ];
    process.stdout.write(`Experiment B: ${BURST} keys × 10 KiB flushed at once, ${RUNS} interleaved run(s) per configuration\n`);
    await burst(s, { transactional: true, cap: BURST }); // discarded warm-up burst
    const samples = new Map<string, { ms: number[]; transactions: number }>();
    const progress = startProgress('experiment B', RUNS * configs.length, { plainEveryMs: 10_000 });
    for (let i = 0; i < RUNS; i++) {
      for (const c of configs) {
        const r = await burst(s, c.mode);
        const entry = samples.get(c.name) ?? { ms: [], transactions: r.transactions };
        entry.ms.push(r.ms);
        samples.set(c.name, entry);
        progress.tick();
      }
    }
    progress.stop();
    const best = (name: string) => Math.min(...samples.get(name)!.ms);
    const kafkaFlow: Record<string, number> = { plain: 282, cap256: 300, cap16: 513, cap1: 4_002, cap2000: 279 };
    printTable(
      `Experiment B — ${BURST} × 10 KiB snapshots flushed at once (min of ${RUNS})`,
      configs.map((c) => ({
        configuration: c.name === 'plain' ? 'caching mode (plain producer)' : `maxWritesPerTransaction = ${c.mode.transactional ? c.mode.cap : ''}`,
        transactions: c.name === 'plain' ? '—' : samples.get(c.name)!.transactions,
        ms: best(c.name),
        vs_plain: ratio(best(c.name), best('plain')),
        'kafka-flow ms': BURST === 2_000 ? (kafkaFlow[c.name] ?? '') : '',
        'kafka-flow vs plain': BURST === 2_000 && kafkaFlow[c.name] ? kafkaFlow[c.name]! / kafkaFlow.plain! : '',
      })),
    );

    process.stdout.write(`Experiment A: ${SEQUENTIAL} keys, small snapshots\n`);
    const a = { plain: [] as number[], sequential: [] as number[], together: [] as number[], java: [] as JavaTransactionsResult[], javaDefault: [] as JavaTransactionsResult[], transactions: 0 };
    for (let i = 0; i < RUNS; i++) {
      const plain = await fresh(s, { transactional: false });
      try {
        a.plain.push(await oneAtATime(plain.persistence));
      } finally {
        await plain.backend.close();
      }
      const tx = await fresh(s, { transactional: true, cap: 256 });
      try {
        const before = tx.persistence.stats.transactions;
        a.sequential.push(await oneAtATime(tx.persistence));
        a.transactions = tx.persistence.stats.transactions - before;
      } finally {
        await tx.backend.close();
      }
      // The anchor: the Java client's transactions of the same shape on the same broker, with a
      // 1 ms retry backoff (its floor here) and, in the first run, its default (100 ms).
      const javaTopic = `${s.input}-java-${i}`;
      s.topics.push(javaTopic);
      await s.admin.ensureTopics([{ topic: javaTopic, partitions: 1 }]);
      a.java.push(runJavaTransactions({ topic: javaTopic, group: `${s.groupId}-java`, transactions: SEQUENTIAL, retryBackoffMs: 1 }));
      if (i === 0) a.javaDefault.push(runJavaTransactions({ topic: javaTopic, group: `${s.groupId}-java`, transactions: Math.max(20, SEQUENTIAL / 5), retryBackoffMs: 'default' }));
      const together = await fresh(s, { transactional: true, cap: 256 });
      try {
        const flow = createPartitionFlow(definition, { topic: s.input, partition: 0, assignedAt: '0', persistence: together.persistence, metrics: FlowMetrics.of(new Registry()) });
        await flow.recover();
        await flow.handleBatch(burstMessages(SEQUENTIAL, 'small'));
        a.together.push(await measure(() => flow.persist(Date.now(), 'shutdown')));
      } finally {
        await together.backend.close();
      }
    }
    if (a.transactions !== SEQUENTIAL) throw new Error(`${a.transactions} transactions for ${SEQUENTIAL} sequential writes`);
    const msPerTxn = Math.min(...a.sequential) / SEQUENTIAL;
    const javaMsPerTxn = Math.min(...a.java.map((j) => j.ms)) / SEQUENTIAL;
    const javaDefault = a.javaDefault[0]!;
    const javaDefaultMsPerTxn = javaDefault.ms / Math.max(20, SEQUENTIAL / 5);
    printTable(`Experiment A — ${SEQUENTIAL} keys, small snapshots (min of ${RUNS})`, [
      { mode: 'caching mode (plain producer), one at a time', ms: Math.min(...a.plain), 'kafka-flow ms': SEQUENTIAL === 500 ? 197 : '' },
      { mode: `transactions, one at a time (${a.transactions} txns)`, ms: Math.min(...a.sequential), 'ms per txn': msPerTxn, 'kafka-flow ms': SEQUENTIAL === 500 ? 879 : '' },
      { mode: 'transactions, all at once (one flush)', ms: Math.min(...a.together), 'kafka-flow ms': SEQUENTIAL === 500 ? 13 : '' },
      { mode: `Java client ${STREAMS_VERSION}, one at a time, retry.backoff.ms 1`, ms: Math.min(...a.java.map((j) => j.ms)), 'ms per txn': javaMsPerTxn, 'kafka-flow ms': '' },
      { mode: `Java client ${STREAMS_VERSION}, one at a time, default retry.backoff.ms (100)`, ms: javaDefault.ms, 'ms per txn': javaDefaultMsPerTxn, 'kafka-flow ms': '' },
    ]);

    const figures = {
      expB_cap256_vs_plain: round(ratio(best('cap256'), best('plain'))),
      expB_cap16_vs_plain: round(ratio(best('cap16'), best('plain'))),
      expB_cap1_vs_plain: round(ratio(best('cap1'), best('plain'))),
      [`expB_cap${BURST}_vs_plain`]: round(ratio(best(`cap${BURST}`), best('plain'))),
      expB_plain_ms: round(best('plain')),
      expB_cap256_ms: round(best('cap256')),
      expB_cap16_ms: round(best('cap16')),
      expB_cap1_ms: round(best('cap1')),
      expA_ms_per_txn: round(msPerTxn),
      expA_java_ms_per_txn: round(javaMsPerTxn),
      expA_vs_java: round(ratio(msPerTxn, javaMsPerTxn)),
      expA_java_default_backoff_ms_per_txn: round(javaDefaultMsPerTxn),
      expA_plain_one_at_a_time_ms: round(Math.min(...a.plain)),
      expA_tx_all_at_once_ms: round(Math.min(...a.together)),
    };
    const file = writeResults('persist', figures, {
      versions: { kafka: '4.3.1' },
      notes: {
        experimentB: { keys: BURST, snapshotBytes: PAYLOAD.length, runs: RUNS, statistic: 'min', compression: 'off', transactions: Object.fromEntries([...samples].map(([k, v]) => [k, v.transactions])) },
        experimentA: {
          keys: SEQUENTIAL,
          runs: RUNS,
          statistic: 'min',
          java: `kafka-clients ${STREAMS_VERSION} (bench/anchors/kafka-streams, kft.bench.TxnLatency): the same transactions (a 100-byte record and an offset commit each) on the same broker, interleaved with ours; retry.backoff.ms 1, and once with its default (100 ms, ${Math.max(20, SEQUENTIAL / 5)} transactions)`,
          ours_runs_ms: a.sequential.map((ms) => round(ms)),
          java_runs: a.java,
          java_default_backoff: javaDefault,
        },
        kafkaFlow: { expB_cap256_vs_plain: 1.06, expB_cap16_vs_plain: 1.82, expB_cap1_vs_plain: 14.2, expA_ms_per_txn: 1.76 },
        broker: 'one local KRaft broker, replication factor 1 (a floor: no network latency)',
      },
    });
    printTable('Figures', Object.entries(figures).map(([figure, value]) => ({ figure, value })));
    process.stdout.write(`results: ${file}\n`);
  } finally {
    await consumer.disconnect().catch(() => undefined);
    await admin.deleteTopics(s.topics).catch(() => undefined);
    await admin.close();
  }
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
