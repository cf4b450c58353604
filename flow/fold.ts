import { type KeyTimer, type KeyTimers, type TimerOptions, withoutTimer, withTimer } from './key-timers';
import type { FlowRecord } from './record';

/** A record a fold emits (`ctx.emit`): its value is encoded with the flow's `outputCodec`. */
export interface EmitRecord {
  /** One of the flow's `outputTopics`. */
  readonly topic: string;
  /** Partitioned by key like Kafka's default partitioner (murmur2); a null key goes to the input partition (modulo the count). */
  readonly key: string | Buffer | null;
  /** Encoded with `outputCodec` (JSON by default); null is produced as a null value. */
  readonly value: unknown;
  readonly headers?: Readonly<Record<string, string | Buffer>>;
  /** A fixed partition of the output topic (default: by key, see above). */
  readonly partition?: number;
}

/**
 * The fold's third argument. `emit` hands a record to the output topics: it is produced with the
 * key's next write (transactional Kafka: in the snapshot transaction, exactly once), and only if
 * the fold of this record succeeds — a fold that throws takes its emits with it.
 */
export interface FoldContext {
  emit(output: EmitRecord): void;
  /**
   * The key's timers: `at(epochMs, { name, time })` fires the flow's `onTimer` for this key once the
   * time is reached ('processing': the owner's clock; 'event': the partition's record timestamps),
   * `cancel(name)`. Edits land with the key's next write, and only if the fold succeeds.
   */
  readonly timers: KeyTimers;
}

/**
 * The user's fold: the key's state so far (undefined for a new key) and the next record in, the
 * new state out. Returning `undefined` deletes the key's persisted state at the end of the batch.
 * It may return a Promise; a fold that returns plain values keeps the engine on its sync path.
 * Treat the state as immutable: return a new object rather than changing the one given, because
 * a persist may be writing the previous one. `ctx.emit` emits output records (see FoldContext);
 * a fold that emits nothing may take two arguments.
 */
export type Fold<S, V> = (state: S | undefined, record: FlowRecord<V>, ctx: FoldContext) => S | undefined | Promise<S | undefined>;

/** A key's timer as it fires: its key, name, time and clock. */
export interface FiredTimer extends KeyTimer {
  readonly key: string;
}

/**
 * A key's timer fired (ctx.timers.at): the key's state and the timer in, the new state out
 * (undefined deletes the key, as a fold returning undefined). It may emit and set or cancel the
 * key's timers through `ctx`; its effects land with the key's next write, exactly once. It must
 * return synchronously.
 */
export type OnTimer<S> = (state: S, timer: FiredTimer, ctx: FoldContext) => S | undefined;

const NO_TIMERS: readonly KeyTimer[] = Object.freeze([]);

/** A context whose emits and timer edits go nowhere: journal replay (the outputs went out with the journal's write) and tests. */
export const discardingContext: FoldContext = Object.freeze({
  emit: () => {},
  timers: Object.freeze({ at: () => {}, cancel: () => {}, list: () => NO_TIMERS }),
});

/**
 * Timer edits held until the fold they belong to succeeds, then made on `outer` in order; `list`
 * shows them applied (handleErrorWith: a failed fold's edits go with it).
 */
function heldTimers(outer: FoldContext, held: Array<(ctx: FoldContext) => void>): KeyTimers {
  return {
    at: (epochMs: number, options?: TimerOptions) => {
      held.push((ctx) => ctx.timers.at(epochMs, options));
    },
    cancel: (name: string) => {
      held.push((ctx) => ctx.timers.cancel(name));
    },
    list: () => {
      let timers: readonly KeyTimer[] | undefined = outer.timers.list();
      const shadow: FoldContext = {
        emit: () => {},
        timers: {
          at: (at, o) => {
            timers = withTimer(timers, { name: o?.name ?? String(at), at: Math.floor(at), time: o?.time ?? 'processing' });
          },
          cancel: (name) => {
            timers = withoutTimer(timers, name);
          },
          list: () => timers ?? NO_TIMERS,
        },
      };
      for (const edit of held) edit(shadow);
      return timers ?? NO_TIMERS;
    },
  };
}

export function isPromise<T>(value: T | Promise<T>): value is Promise<T> {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/** Applies `f` to a value that may be a Promise, staying synchronous when it is not. */
function then<A, B>(value: A | Promise<A>, f: (a: A) => B | Promise<B>): B | Promise<B> {
  return isPromise(value) ? value.then(f) : f(value);
}

/**
 * Folds only the records `keep` accepts; the others leave the state as it is (their offsets still
 * count as processed, so they never hold back a commit).
 */
export function filter<S, V>(
  fold: Fold<S, V>,
  keep: (state: S | undefined, record: FlowRecord<V>) => boolean,
): Fold<S, V> {
  return (state, record, ctx) => (keep(state, record) ? fold(state, record, ctx) : state);
}

/** Adapts a fold of `V` values to records carrying `B` values (kafka-flow's `contramap`). */
export function contramapValue<S, V, B>(fold: Fold<S, V>, f: (value: B, record: FlowRecord<B>) => V): Fold<S, B> {
  return (state, record, ctx) => fold(state, { ...record, value: f(record.value, record) }, ctx);
}

/**
 * Changes the state type: `get` reads the inner state out of the outer one, `wrap` builds the outer
 * state from the inner result and the record (kafka-flow's `transformState`, e.g. to add metadata).
 */
export function transformState<S, T, V>(
  fold: Fold<S, V>,
  get: (outer: T) => S,
  wrap: (inner: S, record: FlowRecord<V>) => T,
): Fold<T, V> {
  return (outer, record, ctx) =>
    then(fold(outer === undefined ? undefined : get(outer), record, ctx), (inner) =>
      inner === undefined ? undefined : wrap(inner, record),
    );
}

/** Post-processes the fold's result (when there is one). */
export function mapState<S, V>(fold: Fold<S, V>, f: (state: S, record: FlowRecord<V>) => S | undefined): Fold<S, V> {
  return (state, record, ctx) => then(fold(state, record, ctx), (next) => (next === undefined ? undefined : f(next, record)));
}

/**
 * Catches what the fold throws (or rejects with) and decides the state instead: keep the old state,
 * replace it, or return undefined to delete it. Without this, a throwing fold stops the partition.
 * What the failed fold emitted is discarded with it; the handler may emit instead (its `ctx`).
 */
export function handleErrorWith<S, V>(
  fold: Fold<S, V>,
  handler: (state: S | undefined, error: unknown, record: FlowRecord<V>, ctx: FoldContext) => S | undefined | Promise<S | undefined>,
): Fold<S, V> {
  return (state, record, ctx) => {
    // The inner fold's emits and timer edits are held until it succeeds.
    let held: EmitRecord[] | undefined;
    const edits: Array<(ctx: FoldContext) => void> = [];
    const inner: FoldContext = {
      emit: (output) => {
        held ??= [];
        held.push(output);
      },
      timers: heldTimers(ctx, edits),
    };
    const release = <T>(value: T): T => {
      if (held) for (const output of held) ctx.emit(output);
      for (const edit of edits) edit(ctx);
      return value;
    };
    let result: S | undefined | Promise<S | undefined>;
    try {
      result = fold(state, record, inner);
    } catch (error) {
      return handler(state, error, record, ctx);
    }
    return isPromise(result)
      ? result.then(release, (error: unknown) => handler(state, error, record, ctx))
      : release(result);
  };
}

/**
 * Runs `second` on the same record after `first`, unless `first` returned no state
 * (kafka-flow's `productR`).
 */
export function andThen<S, V>(first: Fold<S, V>, second: Fold<S, V>): Fold<S, V> {
  return (state, record, ctx) =>
    then(first(state, record, ctx), (next) => (next === undefined ? undefined : second(next, record, ctx)));
}
