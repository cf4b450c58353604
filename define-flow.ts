// defineFlow: the engine's options (flow/) and the backend's (persistence/options.ts), validated together.
import { z } from 'zod';
import { ConfigError } from './config/errors';
import type { Codec } from './core/codec/codec';
import { jsonCodec } from './core/codec/json';
import { type Duration, durationSchema, toMillis } from './core/duration';
import type { PartitionFlowDefinition } from './flow/create-partition-flow';
import type { DecodeFailurePolicy } from './flow/decode-policy';
import type { OutputEncoder } from './flow/emit';
import type { Fold, OnTimer } from './flow/fold';
import type { TimeDomain } from './flow/key-timers';
import { defaultDeadLetterTopic, type PoisonPolicy } from './flow/poison';
import type { FlowRecord } from './flow/record';
import { type TimersOptions, timerPolicy } from './flow/timers';
import { backendsWith, descriptorOf, lackOf } from './persistence/descriptors';
import {
  type CassandraPersistenceOptions,
  type KafkaPersistenceOptions,
  type MemoryPersistenceOptions,
  type PersistenceOptions,
  persistenceOptionsSchema,
  type ResolvedPersistence,
  resolvePersistence,
} from './persistence/options';

export type { CassandraPersistenceOptions, KafkaPersistenceOptions, MemoryPersistenceOptions, PersistenceOptions, ResolvedPersistence };

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
  /**
   * A key's timer fired (set by the fold with `ctx.timers.at`): the new state out, undefined deletes
   * the key; it may emit and set timers. Timers are persisted with the key's state and survive
   * restarts and rebalances; a fire lands with the key's next write, exactly once. Snapshot modes only.
   */
  onTimer?: OnTimer<S>;
  /**
   * Deletes a key this long after its last record (as a fold returning undefined would): by the
   * owner's clock (`time: 'processing'`, default) or by record timestamps (`'event'`).
   */
  stateTtl?: Duration | { after: Duration; time?: TimeDomain };
  /** Event time: a partition's watermark is its highest record timestamp so far minus this. Default 0. */
  allowedLateness?: Duration;
  /** Decodes input values. Default JSON. */
  valueCodec?: Codec<V>;
  /** A value the codec cannot decode: 'fail' (default), 'skip' or 'dead-letter'. */
  onDecodeFailure?: DecodeFailurePolicy;
  /** The fold threw for a record: 'fail' (default; the partition is retried from persisted state), 'skip' or 'dead-letter'. */
  onFoldFailure?: PoisonPolicy;
  /** The dead-letter topic of an input topic. Default `<groupId>-<name>-<inputTopic>-dead-letters` (created if absent). */
  deadLetterTopic?: (inputTopic: string) => string;
  /**
   * Show record keys, and the messages of user code's errors (a fold's, a filter's, a codec's: they
   * may quote the record), in logs and error messages (and so in Temporal failures and workflow
   * histories). Default false: a key is shown as a short hash (`#1a2b3c4d`) and such an error's
   * message is withheld (its class name stays).
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
  /**
   * The most outputs (emitted records and dead letters) a partition holds until they land. Reached,
   * the owner persists the keys with pending outputs at once and folds nothing more until they have
   * landed (backpressure: a fold that emits faster than persists land waits for them). Default 10,000.
   */
  maxPendingOutputs?: number;
  /**
   * The idle flush: a partition whose fold has caught up with its log end (the high watermark of
   * its last fetch) and then received nothing for this long has every key with records not yet
   * persisted written and its offset committed, instead of at the next `persistEvery`. A partition
   * that keeps receiving records never flushes so. Default 250 ms; false keeps kafka-flow's cadence
   * exactly (see docs/design.md, "Idle flush").
   */
  idleFlush?: Duration | false;
  /** Record-level filter before a key is created (kafka-flow FilterRecord); filtered records still commit. */
  filter?: (record: FlowRecord<V>) => boolean;
  /** Derives the key to fold a record under, before filter and fold (kafka-flow RemapKey). */
  remapKey?: (key: string, record: FlowRecord<V>) => string;
  /** The group consumer's timeouts (kafkajs defaults: session 30 s, heartbeat 3 s, rebalance 60 s). */
  consumer?: ConsumerOptions;
  /**
   * For folds that return a Promise. Unset (default): batch by batch — each batch's records are
   * folded before the next batch is taken, the batch's keys concurrently. A positive integer:
   * pipelined — at most this many keys of a partition fold at once (a key's records always in
   * offset order), and the next batch is taken while earlier keys still fold, so a slow key holds
   * up only its own records. Either way the committed offset never passes a record not yet folded
   * (a key holds its earliest unpersisted offset). 1 folds one record at a time.
   */
  asyncConcurrency?: number;
  /**
   * A bound on the keys each worker process holds in memory, shared by its partitions: the other
   * keys stay in the local state store and are read back when a record comes for them, and a
   * restart onto an intact store loads no key. `maxKeys` bounds their number, `maxBytes` their
   * size (each key counts its stored snapshot record's bytes plus 200); either or both. Needs local
   * state (`persistence.localState` or `KFT_STATE_DIR`; Kafka, or Cassandra in mode 'snapshots' with a generation fence). The
   * worker's `KFT_STATE_CACHE_MAX_KEYS` and `KFT_STATE_CACHE_MAX_BYTES` override them. Default:
   * every key in memory. See docs/local-state.md.
   */
  stateCache?: { maxKeys?: number; maxBytes?: number };
  /**
   * Each partition's state kept warm on this many other workers (Kafka Streams' standby replicas):
   * they tail its snapshot partition into their local store, and the group's assignment gives a
   * partition whose owner left to the worker with the freshest copy, which then restores only the
   * records written since its last round. Needs local state (`persistence.localState` or
   * `KFT_STATE_DIR`) on Kafka persistence; the worker's `KFT_STANDBY_REPLICAS` overrides it. Default 0.
   */
  standbyReplicas?: number;
}

export interface ConsumerOptions {
  /** A member silent for this long is evicted and its partitions move (failover time after a crash). */
  sessionTimeout?: Duration;
  heartbeatInterval?: Duration;
  /** How long a rebalance waits for members to rejoin (and for their flush on revoke). */
  rebalanceTimeout?: Duration;
  /**
   * How a rebalance moves partitions. `cooperative` (default): only the partitions that move stop
   * — given up by their owner, then handed on in a second round — while the others go on being
   * fetched, folded and committed (each commit fenced by the member's current generation). `eager`:
   * every member gives up every partition at every rebalance (kafkajs's protocol; a partition that
   * stays keeps its state in memory but stops). A group runs cooperative only while every member
   * speaks it: during a rolling upgrade from an earlier (eager) version it runs eager. The worker's
   * `KFT_REBALANCE` overrides it.
   */
  rebalance?: 'eager' | 'cooperative';
}

/** A validated flow, as `defineFlow` returns it. */
export interface FlowDefinition<S, V> extends PartitionFlowDefinition<S, V> {
  readonly kind: 'kafka-flow-temporal/flow';
  readonly groupId: string;
  readonly topics: readonly string[];
  readonly persistence: ResolvedPersistence;
  readonly consumer: { readonly sessionTimeoutMs: number; readonly heartbeatIntervalMs: number; readonly rebalanceTimeoutMs: number; readonly rebalance: 'eager' | 'cooperative' };
  /** Keys and codec error messages in logs and errors (default false: hashed / withheld; core/redact). */
  readonly logKeys: boolean;
  /** Undefined: batch by batch (see FlowOptions.asyncConcurrency). */
  readonly asyncConcurrency: number | undefined;
  /** The idle flush's quiet time (FlowOptions.idleFlush), ms; undefined: off. */
  readonly idleFlushMs: number | undefined;
  /** FlowOptions.stateCache; undefined: every key in memory. */
  readonly stateCache: { readonly maxKeys?: number; readonly maxBytes?: number } | undefined;
  /** FlowOptions.standbyReplicas (0: none). */
  readonly standbyReplicas: number;
}

/** How long a caught-up partition must receive nothing before its idle flush, by default. */
export const DEFAULT_IDLE_FLUSH_MS = 250;

/** A partition's default bound on outputs not landed yet (≈ 3 MB of small outputs). */
export const DEFAULT_MAX_PENDING_OUTPUTS = 10_000;

const fn = (what: string) => z.custom<(...args: never[]) => unknown>((v) => typeof v === 'function', `${what} must be a function`);
const name = z.string().min(1).regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, ".", "_" and "-" only');

const schema = z.strictObject({
  name,
  groupId: z.string().min(1),
  topics: z.array(z.string().min(1)).min(1),
  fold: fn('fold'),
  persistence: persistenceOptionsSchema.optional(),
  timers: z
    .strictObject({
      persistPeriodically: z
        .strictObject({
          fireEvery: durationSchema.optional(),
          persistEvery: durationSchema.optional(),
          flushOnRevoke: z.boolean().optional(),
          ignorePersistErrors: z.boolean().optional(),
        })
        .optional(),
      unloadOrphaned: z
        .strictObject({
          fireEvery: durationSchema.optional(),
          maxIdle: durationSchema.optional(),
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
  outputEvery: durationSchema.optional(),
  maxPendingOutputs: z.number().int().positive().optional(),
  idleFlush: z.union([durationSchema, z.literal(false)]).optional(),
  filter: fn('filter').optional(),
  remapKey: fn('remapKey').optional(),
  consumer: z
    .strictObject({
      sessionTimeout: durationSchema.optional(),
      heartbeatInterval: durationSchema.optional(),
      rebalanceTimeout: durationSchema.optional(),
      rebalance: z.enum(['eager', 'cooperative']).optional(),
    })
    .optional(),
  asyncConcurrency: z.number().int().positive().optional(),
  stateCache: z
    .strictObject({ maxKeys: z.number().int().positive().optional(), maxBytes: z.number().int().min(200, 'must be at least 200 (one key)').optional() })
    .refine((c) => c.maxKeys !== undefined || c.maxBytes !== undefined, 'needs maxKeys, maxBytes or both')
    .optional(),
  standbyReplicas: z.number().int().nonnegative().optional(),
  onTimer: fn('onTimer').optional(),
  stateTtl: z.union([durationSchema, z.strictObject({ after: durationSchema, time: z.enum(['processing', 'event']).optional() })]).optional(),
  allowedLateness: durationSchema.optional(),
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
  const noDeadLetters = deadLetters ? lackOf(persistence, 'deadLetters') : undefined;
  if (noDeadLetters) {
    const which = onDecodeFailure === 'dead-letter' ? 'onDecodeFailure' : 'onFoldFailure';
    throw new ConfigError(
      `invalid flow definition "${options.name}": ${which}: 'dead-letter' needs persistence to ${backendsWith('deadLetters')} ` +
        `(dead letters are produced with the key writes that pass them), not ${noDeadLetters}`,
    );
  }
  const outputTopics = [...new Set(options.outputTopics ?? [])];
  const noOutputs = outputTopics.length > 0 ? lackOf(persistence, 'outputs') : undefined;
  if (noOutputs) {
    throw new ConfigError(
      `invalid flow definition "${options.name}": outputTopics needs persistence to ${backendsWith('outputs')} ` +
        `(outputs are produced with the key writes that pass their records), not ${noOutputs}`,
    );
  }
  const ttl = options.stateTtl;
  const stateTtl =
    ttl === undefined
      ? undefined
      : typeof ttl === 'object' && ttl !== null && 'after' in ttl
        ? { ms: toMillis(ttl.after, 'stateTtl.after'), time: ttl.time ?? ('processing' as const) }
        : { ms: toMillis(ttl as Duration, 'stateTtl'), time: 'processing' as const };
  if (stateTtl && !(stateTtl.ms > 0)) throw new ConfigError(`invalid flow definition "${options.name}": stateTtl must be more than 0`);
  if (options.onTimer || stateTtl) {
    const which = options.onTimer ? 'onTimer' : 'stateTtl';
    if (!descriptorOf(persistence.backend).capabilities.keyTimers) {
      throw new ConfigError(`invalid flow definition "${options.name}": ${which} needs persistence to ${backendsWith('keyTimers')}, not backend '${persistence.backend}'`);
    }
    if (persistence.mode === 'journal' || persistence.mode === 'journal+snapshots') {
      throw new ConfigError(
        `invalid flow definition "${options.name}": ${which} needs mode 'snapshots' (a key's timers are persisted with its snapshot; a journal replay would lose them), not mode '${persistence.mode}'`,
      );
    }
  }
  const allowedLatenessMs = toMillis(options.allowedLateness ?? 0, 'allowedLateness');
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
    maxPendingOutputs: options.maxPendingOutputs ?? DEFAULT_MAX_PENDING_OUTPUTS,
    filter: options.filter,
    remapKey: options.remapKey,
    consumer: {
      sessionTimeoutMs: toMillis(options.consumer?.sessionTimeout ?? 30_000, 'consumer.sessionTimeout'),
      heartbeatIntervalMs: toMillis(options.consumer?.heartbeatInterval ?? 3_000, 'consumer.heartbeatInterval'),
      rebalanceTimeoutMs: toMillis(options.consumer?.rebalanceTimeout ?? 60_000, 'consumer.rebalanceTimeout'),
      rebalance: options.consumer?.rebalance ?? 'cooperative',
    },
    logKeys: options.logKeys ?? false,
    asyncConcurrency: options.asyncConcurrency,
    onTimer: options.onTimer,
    stateTtl,
    allowedLatenessMs,
    idleFlushMs: options.idleFlush === false ? undefined : toMillis(options.idleFlush ?? DEFAULT_IDLE_FLUSH_MS, 'idleFlush'),
    stateCache: options.stateCache ? Object.freeze(definedOnly({ maxKeys: options.stateCache.maxKeys, maxBytes: options.stateCache.maxBytes })) : undefined,
    standbyReplicas: options.standbyReplicas ?? 0,
  });
}

/** The object without its undefined fields (a frozen option reads as the user wrote it). */
function definedOnly<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
