import type { Registry } from 'prom-client';
import { z } from 'zod';
import { ConfigError } from '../config/errors';
import { type CassandraFlowOptions, cassandraFlowOptionsShape } from '../persistence/cassandra/options';
import type { PartitionPersistence } from '../persistence/partition-persistence';
import type { PersistenceMode } from '../persistence/types';
import type { Clock } from './clock';
import type { Codec } from '../core/codec/codec';
import { jsonCodec } from '../core/codec/json';
import type { DecodeFailurePolicy } from './decode-policy';
import { type Duration, toMillis } from '../core/duration';
import type { OutputEncoder } from './emit';
import type { Fold } from './fold';
import type { Logger } from '../core/logger';
import { FlowMetrics } from './metrics';
import { PartitionFlow } from './partition-flow';
import { defaultDeadLetterTopic, type PoisonPolicy } from './poison';
import type { FlowRecord } from './record';
import { type TimerPolicy, type TimersOptions, timerPolicy } from './timers';

export interface MemoryPersistenceOptions {
  backend: 'memory';
  /** Default 'snapshots'; 'none' makes the flow transient (nothing persisted). */
  mode?: PersistenceMode;
}

export interface KafkaPersistenceOptions {
  backend: 'kafka';
  /** Snapshots in a compacted topic; 'none' makes the flow transient. Default 'snapshots'. */
  mode?: 'snapshots' | 'none';
  /** Snapshot writes and the input-offset commit in one transaction per partition (fencing). */
  transactional?: boolean;
  /** Group-commit cap: the most snapshot writes in one transaction. Default 256. */
  maxWritesPerTransaction?: number;
  /** A recovery read without progress for this long fails. Default 3 min. */
  recoveryStallTimeout?: Duration;
  /** The compacted snapshot topic. Default chosen by the backend. */
  snapshotTopic?: string;
  /** Snapshots of at least this many bytes are compressed. Default 10000. */
  compressionThreshold?: number;
  /** Partition p's producer is `<prefix>-snapshot-<p>`; unique per flow. Default `<groupId>-<name>`. */
  transactionalIdPrefix?: string;
  /** Replication factor of the snapshot topic when it is created. Default 1 (use 3 in production). */
  replicationFactor?: number;
  /**
   * A local state store per partition under `dir` (like Kafka Streams' state.dir), so a restart or a
   * partition coming back reads only the snapshots written after its checkpoint. Needs
   * `transactional: true`. Default off; the worker's `KFT_STATE_DIR` turns it on (and overrides
   * `dir`) for transactional flows. See docs/local-state.md.
   */
  localState?: { dir: string };
  [option: string]: unknown;
}

/** Cassandra tables in kafka-flow's shape; every option is described in docs/cassandra.md. */
export interface CassandraPersistenceOptions extends CassandraFlowOptions {
  backend: 'cassandra';
  /** Default 'snapshots'. */
  mode?: PersistenceMode;
  /** Snapshots of at least this many bytes are compressed. Default 10000. */
  compressionThreshold?: number;
}

export type PersistenceOptions = MemoryPersistenceOptions | KafkaPersistenceOptions | CassandraPersistenceOptions;

/** What `defineFlow` takes. */
export interface FlowOptions<S, V> {
  name: string;
  groupId: string;
  topics: readonly string[];
  fold: Fold<S, V>;
  /** Default `{ backend: 'memory' }`. */
  persistence?: PersistenceOptions;
  /** kafka-flow's TimerFlowOf names and defaults. Default: persistPeriodically with its defaults. */
  timers?: TimersOptions;
  /** Decodes input values. Default JSON. */
  valueCodec?: Codec<V>;
  /** A value the codec cannot decode: 'fail' (default), 'skip' or 'dead-letter'. */
  onDecodeFailure?: DecodeFailurePolicy;
  /** The fold threw for a record: 'fail' (default; the partition is retried from persisted state), 'skip' or 'dead-letter'. */
  onFoldFailure?: PoisonPolicy;
  /** The dead-letter topic of an input topic. Default `<groupId>-<name>-<inputTopic>-dead-letters` (created if absent). */
  deadLetterTopic?: (inputTopic: string) => string;
  /**
   * Show record keys, and codec errors that may quote values, in logs and error messages (and so in
   * Temporal failures). Default false: a key is shown as a short hash (`#1a2b3c4d`) and a codec's
   * error message is withheld.
   */
  logKeys?: boolean;
  /**
   * The topics the fold may emit to (`ctx.emit`), created if absent at worker start with the input
   * topic's partition count. Emitting to another topic fails the record's fold. Needs persistence
   * to Kafka or Cassandra.
   */
  outputTopics?: readonly string[];
  /** Encodes emitted values. Default JSON. */
  outputCodec?: OutputEncoder;
  /** Keys with pending outputs are persisted (and their outputs produced) at least this often. Default 1 s. */
  outputEvery?: Duration;
  /** Record-level filter before a key is created (kafka-flow FilterRecord); filtered records still commit. */
  filter?: (record: FlowRecord<V>) => boolean;
  /** Derives the key to fold a record under, before filter and fold (kafka-flow RemapKey). */
  remapKey?: (key: string, record: FlowRecord<V>) => string;
  /** The group consumer's timeouts (kafkajs defaults: session 30 s, heartbeat 3 s, rebalance 60 s). */
  consumer?: ConsumerOptions;
}

export interface ConsumerOptions {
  /** A member silent for this long is evicted and its partitions move (failover time after a crash). */
  sessionTimeout?: Duration;
  heartbeatInterval?: Duration;
  /** How long a rebalance waits for members to rejoin (and for their flush on revoke). */
  rebalanceTimeout?: Duration;
}

/** Resolved persistence options: defaults filled in, durations in milliseconds. */
export type ResolvedPersistence =
  | { backend: 'memory'; mode: PersistenceMode }
  | {
      backend: 'kafka';
      mode: 'snapshots' | 'none';
      transactional: boolean;
      maxWritesPerTransaction: number;
      recoveryStallTimeoutMs: number;
      snapshotTopic: string | undefined;
      compressionThreshold: number;
      /** The local state store (docs/local-state.md); undefined: off. */
      localState?: { readonly dir: string };
      options: Readonly<Record<string, unknown>>;
    }
  | { backend: 'cassandra'; mode: PersistenceMode; compressionThreshold: number; options: Readonly<CassandraFlowOptions> };

/** A validated flow, as `defineFlow` returns it. */
export interface FlowDefinition<S, V> {
  readonly kind: 'kafka-flow-temporal/flow';
  readonly name: string;
  readonly groupId: string;
  readonly topics: readonly string[];
  readonly fold: Fold<S, V>;
  readonly persistence: ResolvedPersistence;
  readonly timers: TimerPolicy;
  readonly valueCodec: Codec<V>;
  readonly onDecodeFailure: DecodeFailurePolicy;
  readonly onFoldFailure: PoisonPolicy;
  /** The dead-letter topic of each input topic, when a policy dead-letters (else undefined). */
  readonly deadLetterTopics: Readonly<Record<string, string>> | undefined;
  /** The topics the fold may emit to (empty: it emits nothing). */
  readonly outputTopics: readonly string[];
  readonly outputCodec: OutputEncoder;
  readonly outputEveryMs: number;
  readonly filter: ((record: FlowRecord<V>) => boolean) | undefined;
  readonly remapKey: ((key: string, record: FlowRecord<V>) => string) | undefined;
  readonly consumer: { readonly sessionTimeoutMs: number; readonly heartbeatIntervalMs: number; readonly rebalanceTimeoutMs: number };
  /** Keys and codec error messages in logs and errors (default false: hashed / withheld; core/redact). */
  readonly logKeys: boolean;
}

const fn = (what: string) => z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', `${what} must be a function`);
const duration = z.union([z.number().nonnegative(), z.string().min(1)]);
const mode = z.enum(['none', 'snapshots', 'journal', 'journal+snapshots']);
const name = z.string().min(1).regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, ".", "_" and "-" only');

const schema = z.strictObject({
  name,
  groupId: z.string().min(1),
  topics: z.array(z.string().min(1)).min(1),
  fold: fn('fold'),
  persistence: z
    .discriminatedUnion('backend', [
      z.strictObject({ backend: z.literal('memory'), mode: mode.optional() }),
      z.looseObject({
        backend: z.literal('kafka'),
        mode: z.enum(['snapshots', 'none']).optional(),
        transactional: z.boolean().optional(),
        maxWritesPerTransaction: z.number().int().positive().optional(),
        recoveryStallTimeout: duration.optional(),
        snapshotTopic: z.string().min(1).optional(),
        compressionThreshold: z.number().int().nonnegative().optional(),
        transactionalIdPrefix: z.string().min(1).optional(),
        replicationFactor: z.number().int().positive().optional(),
        localState: z.strictObject({ dir: z.string().min(1) }).optional(),
      }),
      z.strictObject({
        backend: z.literal('cassandra'),
        mode: mode.optional(),
        compressionThreshold: z.number().int().nonnegative().optional(),
        ...cassandraFlowOptionsShape,
      }),
    ])
    .optional(),
  timers: z
    .strictObject({
      persistPeriodically: z
        .strictObject({
          fireEvery: duration.optional(),
          persistEvery: duration.optional(),
          flushOnRevoke: z.boolean().optional(),
          ignorePersistErrors: z.boolean().optional(),
        })
        .optional(),
      unloadOrphaned: z
        .strictObject({
          fireEvery: duration.optional(),
          maxIdle: duration.optional(),
          maxOffsetDifference: z.number().int().nonnegative().optional(),
          flushOnRevoke: z.boolean().optional(),
        })
        .optional(),
    })
    .optional(),
  valueCodec: z
    .custom<Codec<unknown>>(
      (v) => typeof v === 'object' && v !== null && typeof (v as Codec<unknown>).decode === 'function' && typeof (v as Codec<unknown>).encode === 'function',
      'valueCodec must have encode and decode functions',
    )
    .optional(),
  onDecodeFailure: z.enum(['fail', 'skip', 'dead-letter']).optional(),
  onFoldFailure: z.enum(['fail', 'skip', 'dead-letter']).optional(),
  deadLetterTopic: fn('deadLetterTopic').optional(),
  logKeys: z.boolean().optional(),
  outputTopics: z.array(z.string().min(1)).optional(),
  outputCodec: z
    .custom<OutputEncoder>(
      (v) => typeof v === 'object' && v !== null && typeof (v as OutputEncoder).encode === 'function',
      'outputCodec must have an encode function',
    )
    .optional(),
  outputEvery: duration.optional(),
  filter: fn('filter').optional(),
  remapKey: fn('remapKey').optional(),
  consumer: z
    .strictObject({ sessionTimeout: duration.optional(), heartbeatInterval: duration.optional(), rebalanceTimeout: duration.optional() })
    .optional(),
});

/**
 * Declares a flow: validates everything up front (a mistake throws ConfigError naming the field)
 * and fills in kafka-flow's defaults.
 */
export function defineFlow<S, V = unknown>(options: FlowOptions<S, V>): FlowDefinition<S, V> {
  const parsed = schema.safeParse(options);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.') || '(flow)'}: ${i.message}`).join('; ');
    const label = typeof (options as { name?: unknown })?.name === 'string' ? ` "${(options as { name: string }).name}"` : '';
    throw new ConfigError(`invalid flow definition${label}: ${problems}`, { cause: parsed.error });
  }
  const timers = timerPolicy(options.timers ?? { persistPeriodically: {} });
  const persistence = resolvePersistence(options.persistence ?? { backend: 'memory' });
  const onDecodeFailure = options.onDecodeFailure ?? 'fail';
  const onFoldFailure = options.onFoldFailure ?? 'fail';
  const deadLetters = onDecodeFailure === 'dead-letter' || onFoldFailure === 'dead-letter';
  if (deadLetters && (persistence.backend === 'memory' || persistence.mode === 'none')) {
    const which = onDecodeFailure === 'dead-letter' ? 'onDecodeFailure' : 'onFoldFailure';
    throw new ConfigError(
      `invalid flow definition "${options.name}": ${which}: 'dead-letter' needs persistence to Kafka or Cassandra ` +
        `(dead letters are produced with the key writes that pass them), not ${persistence.backend === 'memory' ? "backend 'memory'" : "mode 'none'"}`,
    );
  }
  const outputTopics = [...new Set(options.outputTopics ?? [])];
  if (outputTopics.length > 0 && (persistence.backend === 'memory' || persistence.mode === 'none')) {
    throw new ConfigError(
      `invalid flow definition "${options.name}": outputTopics needs persistence to Kafka or Cassandra ` +
        `(outputs are produced with the key writes that pass their records), not ${persistence.backend === 'memory' ? "backend 'memory'" : "mode 'none'"}`,
    );
  }
  const outputEveryMs = toMillis(options.outputEvery ?? 1000, 'outputEvery');
  if (!(outputEveryMs > 0)) throw new ConfigError(`invalid flow definition "${options.name}": outputEvery must be more than 0`);
  let deadLetterTopics: Record<string, string> | undefined;
  if (deadLetters) {
    deadLetterTopics = {};
    for (const topic of options.topics) {
      const name = options.deadLetterTopic ? options.deadLetterTopic(topic) : defaultDeadLetterTopic(options.groupId, options.name, topic);
      if (typeof name !== 'string' || name.length === 0) throw new ConfigError(`invalid flow definition "${options.name}": deadLetterTopic("${topic}") must return a topic name`);
      deadLetterTopics[topic] = name;
    }
  }
  return Object.freeze({
    kind: 'kafka-flow-temporal/flow' as const,
    name: options.name,
    groupId: options.groupId,
    topics: Object.freeze([...options.topics]),
    fold: options.fold,
    persistence,
    timers,
    valueCodec: options.valueCodec ?? jsonCodec<V>(),
    onDecodeFailure,
    onFoldFailure,
    deadLetterTopics: deadLetterTopics ? Object.freeze(deadLetterTopics) : undefined,
    outputTopics: Object.freeze(outputTopics),
    outputCodec: options.outputCodec ?? jsonCodec<unknown>(),
    outputEveryMs,
    filter: options.filter,
    remapKey: options.remapKey,
    consumer: {
      sessionTimeoutMs: toMillis(options.consumer?.sessionTimeout ?? 30_000, 'consumer.sessionTimeout'),
      heartbeatIntervalMs: toMillis(options.consumer?.heartbeatInterval ?? 3_000, 'consumer.heartbeatInterval'),
      rebalanceTimeoutMs: toMillis(options.consumer?.rebalanceTimeout ?? 60_000, 'consumer.rebalanceTimeout'),
    },
    logKeys: options.logKeys ?? false,
  });
}

function resolvePersistence(p: PersistenceOptions): ResolvedPersistence {
  switch (p.backend) {
    case 'memory':
      return { backend: 'memory', mode: p.mode ?? 'snapshots' };
    case 'kafka': {
      const { backend, mode, transactional, maxWritesPerTransaction, recoveryStallTimeout, snapshotTopic, compressionThreshold, localState, ...rest } = p;
      if (localState && !transactional) {
        throw new ConfigError('persistence.localState needs transactional: true (its checkpoint relies on the snapshot partition having one fenced writer)');
      }
      return {
        backend,
        mode: mode ?? 'snapshots',
        transactional: transactional ?? false,
        maxWritesPerTransaction: maxWritesPerTransaction ?? 256,
        recoveryStallTimeoutMs: toMillis(recoveryStallTimeout ?? 180_000, 'persistence.recoveryStallTimeout'),
        snapshotTopic,
        compressionThreshold: compressionThreshold ?? 10_000,
        ...(localState ? { localState: { dir: localState.dir } } : {}),
        options: rest,
      };
    }
    case 'cassandra': {
      const { backend, mode, compressionThreshold, ...rest } = p;
      return { backend, mode: mode ?? 'snapshots', compressionThreshold: compressionThreshold ?? 10_000, options: rest };
    }
  }
}

/** What a PartitionFlow needs beyond the definition: where it is, and its I/O and observability. */
export interface PartitionContext<S, V> {
  readonly topic: string;
  readonly partition: number;
  readonly assignedAt: string;
  readonly persistence: PartitionPersistence<S, V>;
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** The process's flow metrics (one per registry); or a registry to create them in. */
  readonly metrics?: FlowMetrics;
  readonly registry?: Registry;
}

/** Builds the engine for one assigned partition of a defined flow. */
export function createPartitionFlow<S, V>(definition: FlowDefinition<S, V>, context: PartitionContext<S, V>): PartitionFlow<S, V> {
  return new PartitionFlow<S, V>({
    flow: definition.name,
    topic: context.topic,
    partition: context.partition,
    assignedAt: context.assignedAt,
    fold: definition.fold,
    codec: definition.valueCodec,
    persistence: context.persistence,
    mode: definition.persistence.mode,
    timers: definition.timers,
    filter: definition.filter,
    remapKey: definition.remapKey,
    onDecodeFailure: definition.onDecodeFailure,
    onFoldFailure: definition.onFoldFailure,
    deadLetterTopic: definition.deadLetterTopics?.[context.topic],
    outputs: definition.outputTopics.length > 0 ? { topics: new Set(definition.outputTopics), encoder: definition.outputCodec } : undefined,
    outputEvery: definition.outputEveryMs,
    clock: context.clock,
    logger: context.logger,
    metrics: context.metrics ?? (context.registry ? FlowMetrics.of(context.registry) : undefined),
  });
}
