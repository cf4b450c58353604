import type { PartitionsReadiness } from '../runtime/flow-runtime';
import { type HttpReply, json } from './router';

/** What `/readyz` checks. */
export interface ReadinessChecks {
  /** The flow's runtime (undefined while the worker is still starting). */
  partitions(): PartitionsReadiness | undefined;
  /** A broker of KAFKA_BROKERS accepts a connection. */
  kafkaReachable(): Promise<boolean>;
  /** The Temporal frontend answers its health check. */
  temporalReachable(): Promise<boolean>;
}

/** How many partitions not folding `/readyz` names (the rest are counted). */
const NAMED = 10;

/**
 * `/readyz`: 200 when the worker has joined its group, every partition assigned to it is recovered
 * and folding, and Kafka and Temporal are reachable; otherwise 503 with a short JSON body saying
 * what is not ready.
 */
export async function readiness(checks: ReadinessChecks): Promise<HttpReply> {
  const [kafka, temporal] = await Promise.all([checks.kafkaReachable(), checks.temporalReachable()]);
  const partitions = checks.partitions();
  const notReady: string[] = [];
  if (!kafka) notReady.push('kafka: no broker accepts a connection');
  if (!temporal) notReady.push('temporal: the frontend does not answer');
  if (!partitions) notReady.push('worker: starting');
  else if (!partitions.joined) notReady.push('group: not joined');
  else if (partitions.notReady.length > 0) {
    const named = partitions.notReady.slice(0, NAMED).map((p) => `${p.topic}-${p.partition} (${p.state})`);
    const more = partitions.notReady.length > NAMED ? ` and ${partitions.notReady.length - NAMED} more` : '';
    notReady.push(`partitions not folding: ${named.join(', ')}${more}`);
  }
  const counts = partitions?.joined ? { assigned: partitions.assigned, folding: partitions.assigned - partitions.notReady.length } : {};
  return notReady.length === 0 ? json(200, { ready: true, ...counts }) : json(503, { ready: false, notReady, ...counts });
}

/**
 * A probe run at most once per `maxAgeMs` whatever the polling rate (orchestrators poll every few
 * seconds, several at once): callers within that time share its last answer, or the one in flight.
 */
export function cachedProbe(probe: () => Promise<boolean>, maxAgeMs = 1000, now: () => number = Date.now): () => Promise<boolean> {
  let last: { at: number; answer: Promise<boolean> } | undefined;
  return () => {
    if (last === undefined || now() - last.at >= maxAgeMs) last = { at: now(), answer: probe().catch(() => false) };
    return last.answer;
  };
}
