/**
 * The Cassandra integration tests' own fixtures (the set-up they share with the other files, a
 * keyspace per file and raw clients, is test/support/servers.ts's): backends on their own clients,
 * a tally fold and a driver for PartitionFlows on a manual clock, and a private node.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ManualClock } from '../../../flow/clock';
import type { Fold } from '../../../flow/fold';
import { PartitionFlow } from '../../../flow/partition-flow';
import type { InputMessage } from '../../../flow/record';
import { timerPolicy } from '../../../flow/timers';
import { CassandraBackend, type CassandraBackendOptions } from '../../../persistence/cassandra';
import type { PartitionPersistence } from '../../../flow/ports';
import type { PersistenceMode } from '../../../core/persistence-types';
import { freePort, privateCassandra } from '../../support/private-cassandra';
import { cassandraContactPoints, keyspaceName, requireCassandra } from '../../support/servers';

/** A backend on its own client (a separate session, as another process would have). */
export async function startBackend<S, V = unknown>(
  keyspace: string,
  options: Partial<CassandraBackendOptions<S, V>> = {},
): Promise<CassandraBackend<S, V>> {
  await requireCassandra(options.contactPoints ?? cassandraContactPoints);
  return CassandraBackend.start<S, V>({
    applicationId: 'app',
    groupId: 'group',
    keyspace,
    contactPoints: [...cassandraContactPoints],
    ...options,
  });
}

/** Records for `keys` keys round-robin at offsets from..to−1; each value is its offset. */
export function roundRobin(keys: number, from: number, to: number): InputMessage[] {
  const out: InputMessage[] = [];
  for (let o = from; o < to; o++) {
    out.push({ offset: String(o), key: Buffer.from(`k${o % keys}`), value: Buffer.from(String(o)), timestamp: String(1_600_000_000_000 + o) });
  }
  return out;
}

/** A fold whose state is exactly the input it saw: the sum, count and last offset of the key's values. */
export interface Tally {
  sum: number;
  count: number;
  last: number;
}
export const tallyFold: Fold<Tally, number> = (state, record) => ({
  sum: (state?.sum ?? 0) + record.value,
  count: (state?.count ?? 0) + 1,
  last: Number(record.offset),
});

/** The tallies a correct processing of `records` ends with, by key. */
export function expectedTallies(records: readonly InputMessage[]): Map<string, Tally> {
  const out = new Map<string, Tally>();
  for (const r of records) {
    const key = String(r.key);
    const prev = out.get(key);
    const value = Number(String(r.value));
    out.set(key, { sum: (prev?.sum ?? 0) + value, count: (prev?.count ?? 0) + 1, last: Number(r.offset) });
  }
  return out;
}

export const numberCodec = {
  encode: (n: number) => Buffer.from(String(n)),
  decode: (b: Buffer) => Number(b.toString('utf8')),
};

/** A PartitionFlow on a manual clock whose every key is due at each `step` (persistEvery 1 s). */
export function tallyFlow(
  persistence: PartitionPersistence<Tally, number>,
  assignedAt: string,
  options: { mode?: PersistenceMode; ignorePersistErrors?: boolean; topic?: string; partition?: number } = {},
): { flow: PartitionFlow<Tally, number>; clock: ManualClock } {
  const clock = new ManualClock(1_700_000_000_000);
  const flow = new PartitionFlow<Tally, number>({
    flow: 'tally',
    topic: options.topic ?? 'orders',
    partition: options.partition ?? 0,
    assignedAt,
    fold: tallyFold,
    codec: numberCodec,
    persistence,
    mode: options.mode ?? 'snapshots',
    timers: timerPolicy({
      persistPeriodically: { fireEvery: 1000, persistEvery: 1000, ignorePersistErrors: options.ignorePersistErrors ?? false },
    }),
    clock,
  });
  return { flow, clock };
}

/** One poll: fold `batch`, let 2 s pass, fire the timers, persist the due keys (periodic). */
export async function step(flow: PartitionFlow<Tally, number>, clock: ManualClock, batch: InputMessage[]) {
  await flow.handleBatch(batch);
  clock.advance(2000);
  flow.triggerTimers();
  return flow.persist(clock.now(), 'periodic');
}

/** Every key's state after a fresh recovery of `persistence`. */
export async function recoverStates<S, V>(persistence: PartitionPersistence<S, V>): Promise<Map<string, { state?: S; offset?: number; events?: number }>> {
  const out = new Map<string, { state?: S; offset?: number; events?: number }>();
  for await (const found of persistence.recover()) {
    out.set(found.key, { state: found.snapshot?.state, offset: found.snapshot?.offset, events: found.events?.length });
  }
  return out;
}

/**
 * A private Cassandra (its own data dir and ports: the shared server is never touched) for a test
 * file that stops, kills or restarts it, and a Tally backend on it (keyspace `kft_<name>_…`; connect
 * timeout 1 s, reads the driver's 12 s, the backend's reconnection policy capped at 2 s). Call it
 * in the describe: the node, the backend and the data dir go after the file.
 */
export function privateNodeBackend(name: string, options: { fencing?: 'lwt' | 'timestamp' | 'none'; layout?: 'kafka-flow' | 'by-partition' } = {}) {
  const dataDir = mkdtempSync(path.join(tmpdir(), `kft-cassandra-${name}-`));
  let cassandra: ReturnType<typeof privateCassandra> | undefined;
  let backend: CassandraBackend<Tally, number> | undefined;
  afterAll(async () => {
    try {
      await backend?.close().catch(() => undefined);
      await cassandra?.down().catch(() => undefined);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
  let started: Promise<{ cassandra: ReturnType<typeof privateCassandra>; backend: CassandraBackend<Tally, number> }> | undefined;
  return {
    /** Starts the node, then the backend on it (once per file: the tests after the first get the same). */
    start() {
      started ??= (async () => {
        cassandra = privateCassandra(dataDir, await freePort(), await freePort());
        await cassandra.up();
        backend = await CassandraBackend.start<Tally, number>({
          applicationId: 'app',
          groupId: 'group',
          keyspace: keyspaceName(`kft_${name}`),
          contactPoints: [cassandra.contactPoint],
          clientOptions: { socketOptions: { connectTimeout: 1000 } },
          ...options,
        });
        return { cassandra, backend };
      })();
      return started;
    },
  };
}
