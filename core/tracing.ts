/**
 * Our own spans (a recovery, a persist, a fence, a snapshot transaction), as the engine's
 * neighbours open them, without knowing whether tracing is on. Off (the default), `traced` calls
 * its function at once with no span: one check per recovery, persist or transaction, never per
 * record, and no OpenTelemetry module loaded. The worker turns it on (`setTracer`) with a tracer
 * of the SDK it loads only then (workers/observability/tracing.ts).
 *
 * Attributes are a closed set (SpanFields): names, counts, offsets, generations and outcomes,
 * never a record's key or value, and an error is recorded by its class name and code only (its
 * message may quote a record when the flow has `logKeys`). `spanAttributes` drops anything else
 * a caller might pass at run time.
 */

/** What a span of ours may say about itself. */
export interface SpanFields {
  flow?: string;
  topic?: string;
  partition?: number;
  generation?: number;
  /** Why a persist ran (periodic, idle, outputs, revoke, shutdown). */
  reason?: string;
  /** How it ended: committed, fenced, timeout, failed … */
  outcome?: string;
  /** The offset committed with it, or the offset a recovery starts from. */
  offset?: number | string;
  /** Keys recovered, written or deleted. */
  keys?: number;
  deletedKeys?: number;
  /** Records a transaction wrote (snapshots, tombstones, outputs, dead letters) or a recovery read. */
  records?: number;
  snapshots?: number;
  outputs?: number;
  deadLetters?: number;
  /** Keys whose write failed (a revoke's or shutdown's persist reports them instead of throwing). */
  failedKeys?: number;
  /** Snapshot records read from the topic / the local store by a recovery. */
  fromTopic?: number;
  fromLocal?: number;
  fenced?: boolean;
  transactionalId?: string;
}

export type SpanAttributeValue = string | number | boolean;

/** The attribute each field becomes (OpenTelemetry's `namespace.snake_case`). */
const ATTRIBUTE_NAMES: Readonly<Record<keyof SpanFields, string>> = {
  flow: 'kafka_flow.flow',
  topic: 'kafka_flow.topic',
  partition: 'kafka_flow.partition',
  generation: 'kafka_flow.generation',
  reason: 'kafka_flow.reason',
  outcome: 'kafka_flow.outcome',
  offset: 'kafka_flow.offset',
  keys: 'kafka_flow.keys',
  deletedKeys: 'kafka_flow.deleted_keys',
  records: 'kafka_flow.records',
  snapshots: 'kafka_flow.snapshots',
  outputs: 'kafka_flow.outputs',
  deadLetters: 'kafka_flow.dead_letters',
  failedKeys: 'kafka_flow.failed_keys',
  fromTopic: 'kafka_flow.recovery.from_topic',
  fromLocal: 'kafka_flow.recovery.from_local',
  fenced: 'kafka_flow.fenced',
  transactionalId: 'kafka_flow.transactional_id',
};

/** The span names of ours. */
export type SpanName = 'kafka-flow.recovery' | 'kafka-flow.persist' | 'kafka-flow.fence' | 'kafka-flow.transaction';

/**
 * `fields` as span attributes: only the fields SpanFields names (others, and undefined, NaN or
 * non-finite values, dropped), each under its OpenTelemetry name; strings cut at 256 characters.
 */
export function spanAttributes(fields: SpanFields): Record<string, SpanAttributeValue> {
  const out: Record<string, SpanAttributeValue> = {};
  for (const [field, value] of Object.entries(fields)) {
    const name = (ATTRIBUTE_NAMES as Record<string, string | undefined>)[field];
    if (name === undefined || !Object.hasOwn(ATTRIBUTE_NAMES, field)) continue;
    if (typeof value === 'number') {
      if (Number.isFinite(value)) out[name] = value;
    } else if (typeof value === 'string') {
      out[name] = value.length > 256 ? value.slice(0, 256) : value;
    } else if (typeof value === 'boolean') {
      out[name] = value;
    }
  }
  return out;
}

/** What a failed span records of its error: the class name and our error code, never the message. */
export function errorAttributes(err: unknown): { type: string; code?: string } {
  const type = err instanceof Error ? err.name || err.constructor.name : typeof err;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[A-Za-z0-9_.-]{1,64}$/.test(code) ? { type, code } : { type };
}

/** A span while it is open: more fields as they become known. */
export interface OpenSpan {
  set(fields: SpanFields): void;
  /** Marks the span failed with `err` (class name and code) without throwing; a throw from the span's function does it too. */
  fail(err: unknown): void;
}

/** What the worker installs when tracing is on. */
export interface SpanTracer {
  /** Runs `fn` inside a span (active for what it awaits: nested spans become its children), ended when `fn` settles. */
  span<T>(name: SpanName, fields: SpanFields, fn: (span: OpenSpan) => Promise<T>): Promise<T>;
}

let tracer: SpanTracer | undefined;

/** Turns our spans on (the worker, when OTEL_* asks for traces) or off (undefined). */
export function setTracer(t: SpanTracer | undefined): void {
  tracer = t;
}

export function tracingOn(): boolean {
  return tracer !== undefined;
}

/** Runs `fn` in a span named `name` when tracing is on; off, runs it with `span` undefined. */
export function traced<T>(name: SpanName, fields: SpanFields, fn: (span: OpenSpan | undefined) => Promise<T>): Promise<T> {
  const t = tracer;
  return t === undefined ? fn(undefined) : t.span(name, fields, fn);
}
