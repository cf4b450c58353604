// Restore with a local state store (docs/local-state.md) vs without, on the local broker.
//
// 100,000 keys are written to one snapshot partition through the transactional backend with local
// state on (256 keys per transaction). Then, interleaved, 3 times each (median):
//   - restart with intact local state: a new backend on the same state directory restores;
//   - restart with none: a new backend on an empty state directory restores the whole partition.
// Each restore is timed from forPartition (fence included) to the last key recovered (states are
// decoded after: a worker decodes a key's state when the key is first used); the records
// it read from the topic are counted (`restore_topic_records_with_checkpoint` must be 0).
// Then kill -9 under load: a child process restores and writes batches of 256 updates as fast as
// it can; it is killed with SIGKILL at a random moment after it has written 5,000+ records (so
// mostly mid-transaction or mid-local-write). A restart restores from what the killed process
// left on disk: `restore_topic_records_after_crash` is the records read from the topic — the
// delta after its last local checkpoint, not the whole partition — and the result is compared
// key by key with a full restore of the topic.
//
// `npm run bench:restore [-- --quick]` (quick: 10,000 keys, 1 run).
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isQuick, sized } from './lib/args';
import { writeResults } from './lib/results';
import { printTable } from './lib/table';
import { median } from './lib/timing';
import { createKafkaClient, GroupMembership, KafkaAdmin, type KafkaClient } from '../kafka';
import { brokersFromEnv } from '../config/env';
import type { Snapshot } from '../core/persistence-types';
import { KafkaSnapshotBackend } from '../persistence/kafka';

const KEYS = sized(100_000, 10_000);
const RUNS = sized(3, 1);
const BATCH = 256;
const KILL_AFTER = sized(5_000, 2_000);

interface State {
  n: number;
  note: string;
}

interface Names {
  input: string;
  groupId: string;
  snapshotTopic: string;
}

function backend(client: KafkaClient, names: Names, dir: string): KafkaSnapshotBackend<State> {
  return new KafkaSnapshotBackend<State>({
    client,
    flowName: 'bench-restore',
    groupId: names.groupId,
    inputTopic: names.input,
    snapshotTopic: names.snapshotTopic,
    transactionalIdPrefix: `${names.snapshotTopic}-tx`,
    transactional: true,
    maxWritesPerTransaction: BATCH,
    localState: { dir },
  });
}

const state = (i: number, round: number): State => ({ n: round, note: `key ${i} after round ${round} of the restore benchmark` });

/** A restore on `dir`: ms (forPartition to last key), records read from the topic, keys from local state, the keys. */
async function restore(client: KafkaClient, names: Names, dir: string, generation: { generationId: number; memberId: string }) {
  const b = backend(client, names, dir);
  try {
    const started = performance.now();
    const p = await b.forPartition({ topic: names.input, partition: 0, generation, assignedOffset: 0 });
    const recovered = new Map<string, Snapshot<State>>();
    for await (const k of p.recover()) recovered.set(k.key, k.snapshot!);
    const ms = performance.now() - started;
    // Decoded after the clock stops: a worker decodes a key's state when the key is first used.
    const keys = new Map<string, State>();
    for (const [key, snapshot] of recovered) keys.set(key, snapshot.state);
    await p.localWritesDone();
    const r = p.lastRecovery!;
    return { ms, fromTopic: r.fromTopic, fromLocal: r.fromLocal, restore: r.restore, reason: r.fullRestoreReason, keys, fromOffset: r.fromOffset, bound: r.bound };
  } finally {
    await b.close();
  }
}

/** The child of the crash experiment: restore on `dir`, then write updates until killed. */
async function child(arg: string): Promise<void> {
  const { names, dir, generation } = JSON.parse(arg) as { names: Names; dir: string; generation: { generationId: number; memberId: string } };
  const client = createKafkaClient({ brokers: brokersFromEnv(), clientId: 'bench-restore-child', logLevel: 'error' });
  const b = backend(client, names, dir);
  const p = await b.forPartition({ topic: names.input, partition: 0, generation, assignedOffset: 0 });
  for await (const _ of p.recover());
  let written = 0;
  for (let round = 1_000; ; round++) {
    const writes = Array.from({ length: BATCH }, () => {
      const i = Math.floor(Math.random() * KEYS);
      return { key: `key${i}`, snapshot: { state: state(i, round), offset: round } };
    });
    const unique = [...new Map(writes.map((w) => [w.key, w])).values()];
    await p.write({ writes: unique });
    written += unique.length;
    process.stdout.write(`${written}\n`);
  }
}

async function main(): Promise<void> {
  const childArg = process.argv.indexOf('--child');
  if (childArg >= 0) return child(process.argv[childArg + 1]!);

  const client = createKafkaClient({ brokers: brokersFromEnv(), clientId: 'bench-restore', logLevel: 'error' });
  const admin = new KafkaAdmin(client);
  const run = `bench-restore-${Date.now().toString(36)}`;
  const names: Names = { input: `${run}-input`, groupId: `${run}-group`, snapshotTopic: `${run}-snapshots` };
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-bench-restore-'));
  const dir = path.join(root, 'state');
  await admin.ensureTopics([{ topic: names.input, partitions: 1 }]);
  // A joined consumer gives the transactions a real generation.
  const consumer = client.kafka.consumer({ groupId: names.groupId, sessionTimeout: 30_000, heartbeatInterval: 1_000 });
  const membership = new GroupMembership();
  membership.attach(consumer);
  await consumer.connect();
  await consumer.subscribe({ topic: names.input, fromBeginning: true });
  await consumer.run({ autoCommit: false, eachBatch: async () => {} });
  await membership.waitForJoin(60_000);
  const current = membership.current()!;
  const generation = { generationId: current.generationId, memberId: current.memberId };
  let killed: ChildProcess | undefined;
  try {
    // Seed: KEYS keys, through the backend with local state on.
    const seed = backend(client, names, dir);
    await seed.ensureTopic(1);
    const writer = await seed.forPartition({ topic: names.input, partition: 0, generation, assignedOffset: 0 });
    for await (const _ of writer.recover());
    const seeding = performance.now();
    for (let i = 0; i < KEYS; i += BATCH) {
      const writes = [];
      for (let j = i; j < Math.min(KEYS, i + BATCH); j++) writes.push({ key: `key${j}`, snapshot: { state: state(j, 0), offset: 0 } });
      await writer.write({ writes });
    }
    await writer.localWritesDone();
    process.stdout.write(`seeded ${KEYS} keys in ${Math.round(performance.now() - seeding)} ms\n`);
    await seed.close();

    const withCheckpoint: Awaited<ReturnType<typeof restore>>[] = [];
    const without: Awaited<ReturnType<typeof restore>>[] = [];
    for (let r = 0; r < RUNS; r++) {
      withCheckpoint.push(await restore(client, names, dir, generation));
      const empty = path.join(root, `empty-${r}`);
      without.push(await restore(client, names, empty, generation));
      fs.rmSync(empty, { recursive: true, force: true });
    }
    for (const x of [...withCheckpoint, ...without]) {
      if (x.keys.size !== KEYS) throw new Error(`restored ${x.keys.size} keys, expected ${KEYS}`);
    }
    if (withCheckpoint.some((x) => x.restore !== 'delta')) throw new Error('a restart with intact local state did not use it');
    const msWith = median(withCheckpoint.map((x) => x.ms));
    const msWithout = median(without.map((x) => x.ms));

    // kill -9 under load.
    const self = path.join(__dirname, 'restore.ts');
    const runTs = path.join(__dirname, '..', 'bin', 'run-ts.js');
    killed = spawn(process.execPath, [runTs, self, ...(isQuick() ? ['--quick'] : []), '--child', JSON.stringify({ names, dir, generation })], { stdio: ['ignore', 'pipe', 'inherit'] });
    const proc = killed;
    let writtenByChild = 0;
    await new Promise<void>((resolve, reject) => {
      let armed = false;
      proc.stdout!.on('data', (d: Buffer) => {
        const last = d.toString().trim().split('\n').pop();
        writtenByChild = Number(last) || writtenByChild;
        if (!armed && writtenByChild >= KILL_AFTER) {
          armed = true;
          setTimeout(() => {
            proc.kill('SIGKILL');
            resolve();
          }, Math.floor(Math.random() * 250));
        }
      });
      proc.once('exit', (code, signal) => {
        if (!armed) reject(new Error(`the writer exited early (${code ?? signal})`));
      });
    });
    await new Promise((r) => proc.once('exit', r));
    const afterCrash = await restore(client, names, dir, generation);
    const reference = await restore(client, names, path.join(root, 'reference'), generation);
    const same = afterCrash.keys.size === reference.keys.size && [...reference.keys].every(([k, v]) => JSON.stringify(afterCrash.keys.get(k)) === JSON.stringify(v));
    if (!same) throw new Error('the restore after the crash differs from a full restore');
    if (afterCrash.restore !== 'delta') throw new Error(`after the crash: ${afterCrash.restore} restore (${afterCrash.reason})`);

    printTable(`Restore of one snapshot partition, ${KEYS} keys (median of ${RUNS})`, [
      { restart: 'intact local state', ms: Math.round(msWith), 'records read from the topic': withCheckpoint[0]!.fromTopic, 'keys from local state': withCheckpoint[0]!.fromLocal },
      { restart: 'no local state', ms: Math.round(msWithout), 'records read from the topic': without[0]!.fromTopic, 'keys from local state': 0 },
      {
        restart: `after kill -9 under load (${writtenByChild}+ records written)`,
        ms: Math.round(afterCrash.ms),
        'records read from the topic': afterCrash.fromTopic,
        'keys from local state': afterCrash.fromLocal,
      },
    ]);
    const figures = {
      restore_topic_records_with_checkpoint: withCheckpoint[0]!.fromTopic,
      restore_topic_records_without: without[0]!.fromTopic,
      restore_full_vs_checkpoint: Math.round((msWithout / msWith) * 100) / 100,
      restore_with_checkpoint_ms: Math.round(msWith),
      restore_without_ms: Math.round(msWithout),
      restore_topic_records_after_crash: afterCrash.fromTopic,
      restore_after_crash_ms: Math.round(afterCrash.ms),
      crash_records_written_before_kill: writtenByChild,
      crash_topic_records_total: reference.fromTopic,
    };
    printTable('Figures', Object.entries(figures).map(([figure, value]) => ({ figure, value })));
    const file = writeResults('restore', figures, {
      versions: { kafka: '4.3.1', lmdb: JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'node_modules', 'lmdb', 'package.json'), 'utf8')).version },
      notes: {
        keys: KEYS,
        runs: RUNS,
        statistic: 'median',
        batch: BATCH,
        timed: 'forPartition (fence) to the last key recovered; local writes after a full restore run in the background',
        crash: `SIGKILL at a random moment (0-250 ms) after the writer reported ${KILL_AFTER}+ records; the restore equals a full restore key by key`,
        afterCrashRead: { fromOffset: afterCrash.fromOffset, bound: afterCrash.bound },
        quick: isQuick(),
        broker: 'one local KRaft broker, replication factor 1',
      },
    });
    process.stdout.write(`results: ${file}\n`);
  } finally {
    if (killed && killed.exitCode === null && killed.signalCode === null) killed.kill('SIGKILL');
    await consumer.disconnect().catch(() => undefined);
    await admin.deleteTopics([names.input, names.snapshotTopic]).catch(() => undefined);
    await admin.close();
    fs.rmSync(root, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
