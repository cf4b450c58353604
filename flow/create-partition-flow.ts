import type { Registry } from 'prom-client';
import type { Codec } from '../core/codec/codec';
import { type Logger, redactingLogger } from '../core/logger';
import type { PersistenceMode } from '../core/persistence-types';
import type { Clock } from './clock';
import type { DecodeFailurePolicy } from './decode-policy';
import type { OutputEncoder } from './emit';
import type { Fold, OnTimer } from './fold';
import type { TimeDomain } from './key-timers';
import { FlowMetrics } from './metrics';
import { PartitionFlow } from './partition-flow';
import type { PoisonPolicy } from './poison';
import type { PartitionPersistence } from './ports';
import type { FlowRecord } from './record';
import type { StateCache } from './state-cache';
import type { TimerPolicy } from './timers';

/**
 * What the engine reads of a defined flow: a `FlowDefinition` (define-flow.ts) is one. Of its
 * persistence the engine sees only the mode; the backend behind the port is the worker's choice.
 */
export interface PartitionFlowDefinition<S, V> {
  readonly name: string;
  readonly fold: Fold<S, V>;
  readonly persistence: { readonly mode: PersistenceMode };
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
  /** The bound on a partition's outputs not landed yet (see FlowOptions.maxPendingOutputs). */
  readonly maxPendingOutputs?: number;
  /** Undefined: batch by batch (see FlowOptions.asyncConcurrency). */
  readonly asyncConcurrency?: number;
  readonly filter: ((record: FlowRecord<V>) => boolean) | undefined;
  readonly remapKey: ((key: string, record: FlowRecord<V>) => string) | undefined;
  /** Fires a key's timers (FlowOptions.onTimer). */
  readonly onTimer?: OnTimer<S>;
  /** FlowOptions.stateTtl, resolved. */
  readonly stateTtl?: { readonly ms: number; readonly time: TimeDomain };
  /** FlowOptions.allowedLateness, ms. */
  readonly allowedLatenessMs?: number;
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
  /** The worker's bounded state cache (used when the backend reads keys on demand). */
  readonly stateCache?: StateCache;
}

/** Builds the engine for one assigned partition of a defined flow. */
export function createPartitionFlow<S, V>(definition: PartitionFlowDefinition<S, V>, context: PartitionContext<S, V>): PartitionFlow<S, V> {
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
    maxPendingOutputs: definition.maxPendingOutputs,
    asyncConcurrency: definition.asyncConcurrency,
    onTimer: definition.onTimer,
    stateTtl: definition.stateTtl,
    allowedLateness: definition.allowedLatenessMs,
    clock: context.clock,
    // The partition's log lines hold no record data without logKeys, whatever error they carry.
    logger: context.logger && redactingLogger(context.logger),
    metrics: context.metrics ?? (context.registry ? FlowMetrics.of(context.registry) : undefined),
    stateCache: context.stateCache,
  });
}
