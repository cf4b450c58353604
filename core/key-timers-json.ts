import type { KeyTimer } from './persistence-types';

/**
 * A key's timers read back from their stored JSON (`[{"name","at","time"}]`): the backends store
 * them beside the state (the Kafka envelope's `timers`, Cassandra's `metadata`). Throws on anything
 * else, which the reader reports as a corrupt snapshot. Undefined for an empty list.
 */
export function timersFromJson(json: unknown): readonly KeyTimer[] | undefined {
  if (!Array.isArray(json)) throw new Error('not a snapshot envelope: "timers" is not a list');
  const timers: KeyTimer[] = [];
  for (const t of json) {
    const { name, at, time } = (t ?? {}) as { name?: unknown; at?: unknown; time?: unknown };
    if (typeof name !== 'string' || typeof at !== 'number' || !Number.isFinite(at) || (time !== 'processing' && time !== 'event')) {
      throw new Error(`not a snapshot envelope: a timer is ${JSON.stringify(t)}`);
    }
    timers.push({ name, at, time });
  }
  return timers.length > 0 ? timers : undefined;
}

/** A key's timers as their stored JSON text; '' for none (what kafka-flow writes in Cassandra's `metadata`). */
export function timersToJson(timers: readonly KeyTimer[] | undefined): string {
  if (timers === undefined || timers.length === 0) return '';
  return JSON.stringify({ timers: timers.map((t) => ({ name: t.name, at: t.at, time: t.time })) });
}

/** The timers in Cassandra's `metadata` text ('' or null: none). */
export function timersFromMetadata(metadata: string | null | undefined): readonly KeyTimer[] | undefined {
  if (metadata === null || metadata === undefined || metadata === '') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(metadata);
  } catch {
    return undefined; // another writer's metadata (kafka-flow's is free text): not ours, no timers
  }
  const timers = (parsed as { timers?: unknown } | null)?.timers;
  return timers === undefined ? undefined : timersFromJson(timers);
}
