// Shared fixtures for the engine's unit tests: an in-memory backend, a manual clock, and helpers
// that build kafkajs-shaped messages.
import type { Codec } from '../../../core/codec/codec';
import { ManualClock } from '../../../flow/clock';
import type { Fold } from '../../../flow/fold';
import { FlowMetrics } from '../../../flow/metrics';
import { PartitionFlow, type PartitionFlowOptions } from '../../../flow/partition-flow';
import type { InputMessage } from '../../../flow/record';
import { type TimersOptions, timerPolicy } from '../../../flow/timers';
import { InMemoryBackend } from '../../../persistence/memory';
import type { PartitionPersistence } from '../../../flow/ports';
import type { PersistenceMode } from '../../../core/persistence-types';
import { Registry } from 'prom-client';

export const TP = { topic: 'topic', partition: 0 } as const;

export const textCodec: Codec<string> = {
  encode: (s) => Buffer.from(s, 'utf8'),
  decode: (b) => b.toString('utf8'),
};

/** Messages for one key at consecutive offsets, one per value. `key: null` makes keyless records. */
export function records(key: string | null, from: number, values: readonly string[]): InputMessage[] {
  return values.map((value, i) => ({
    offset: String(from + i),
    key: key === null ? null : Buffer.from(key),
    value: Buffer.from(value),
    timestamp: '0',
  }));
}

/** `n` keyless records from `from`: they only move the partition's offset on. */
export function keyless(from: number, n: number): InputMessage[] {
  return records(null, from, Array.from({ length: n }, () => 'x'));
}

/** kafka-flow's test fold: counts records, remembers the last offset, finishes after `waitForN`. */
export interface Count {
  offset: string;
  count: number;
}
export function countingFold(waitForN: number): Fold<Count, string> {
  return (state, record) => {
    const count = (state?.count ?? 0) + 1;
    return count < waitForN ? { offset: record.offset, count } : undefined;
  };
}

export interface HarnessOptions<S> {
  fold: Fold<S, string>;
  timers?: TimersOptions;
  mode?: PersistenceMode;
  assignedAt?: number;
  backend?: InMemoryBackend<S, string>;
  persistence?: PartitionPersistence<S, string>;
  clock?: ManualClock;
  maxWritesPerBatch?: number;
  extra?: Partial<PartitionFlowOptions<S, string>>;
}

export interface Harness<S> {
  flow: PartitionFlow<S, string>;
  backend: InMemoryBackend<S, string>;
  clock: ManualClock;
  metrics: FlowMetrics;
  /** The partition's last committed offset, as the in-memory committer saw it. */
  committed(): number | undefined;
  /** One kafka-flow poll: fold the batch, trigger timers, persist due keys. */
  step(batch: InputMessage[], now?: number): Promise<void>;
}

export async function harness<S>(o: HarnessOptions<S>): Promise<Harness<S>> {
  const backend = o.backend ?? new InMemoryBackend<S, string>();
  const clock = o.clock ?? new ManualClock(Date.parse('2020-03-01T00:00:00.000Z'));
  const mode = o.mode ?? 'snapshots';
  const metrics = FlowMetrics.of(new Registry());
  const flow = new PartitionFlow<S, string>({
    flow: 'test',
    topic: TP.topic,
    partition: TP.partition,
    assignedAt: String(o.assignedAt ?? 0),
    fold: o.fold,
    codec: textCodec,
    persistence: o.persistence ?? backend.forPartition(TP, mode, o.maxWritesPerBatch),
    mode,
    timers: timerPolicy(o.timers ?? { persistPeriodically: {} }),
    clock,
    metrics,
    ...o.extra,
  });
  if (mode !== 'none') await flow.recover();
  return {
    flow,
    backend,
    clock,
    metrics,
    committed: () => backend.committer.committed(TP),
    async step(batch, now = clock.now()) {
      await flow.handleBatch(batch);
      flow.triggerTimers(now);
      await flow.persist(now, 'periodic');
    },
  };
}

export const MINUTE = 60_000;
