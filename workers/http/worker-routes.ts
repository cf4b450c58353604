import type { Registry } from 'prom-client';
import type { StandbyCopy } from '../../persistence/backends';
import { ConfigError } from '../../config/errors';
import { type KeyAnswer, KeyNotFoundError, KeyQueryError, type KeySources, type OwnerKeyAnswer, type QueriedFlow, queryKey } from '../keys/key-query';
import { NotOwnerHereError } from '../runtime/flow-runtime';
import { metricsHandler } from '../observability/metrics-server';
import { type ReadinessChecks, readiness } from './health';
import { failure, type HttpReply, json, Router } from './router';

/** What the live state queries of a worker's flow need, once the worker has started. */
export interface KeyEndpoint {
  readonly flow: QueriedFlow;
  readonly sources: KeySources;
  /** This process's answer as the partition's owner (NotOwnerHereError when it does not fold it now). */
  answerLocally(topic: string, partition: number, key: string): Promise<OwnerKeyAnswer | undefined>;
}

export interface WorkerRoutes {
  readonly registry: Registry;
  /** Temporal core's own metrics, appended to `/metrics`. */
  readonly temporalCoreMetricsUrl?: string;
  readonly readiness: ReadinessChecks;
  /** Undefined while the worker is starting. */
  keys(): KeyEndpoint | undefined;
  /** The flow's standby copies on this worker; undefined while it is starting. */
  standbys?(): { readonly flow: string; readonly copies: readonly StandbyCopy[] } | undefined;
  /** Told of what a request failed with unexpectedly (a 500). */
  onError?(err: unknown): void;
}

/** The worker's HTTP routes: `/metrics`, `/healthz`, `/readyz`, `/flows/:flow/keys/:key`, `/flows/:flow/standbys`. */
export function workerRouter(o: WorkerRoutes): Router {
  return new Router(o.onError)
    .get('/metrics', metricsHandler(o.registry, o.temporalCoreMetricsUrl))
    .get('/healthz', () => json(200, { alive: true }))
    .get('/readyz', () => readiness(o.readiness))
    .get('/flows/:flow/standbys', ({ params }) => {
      const standbys = o.standbys?.();
      if (!standbys) return failure(503, 'Starting', 'the worker is starting: ask again in a moment');
      if (params.flow !== standbys.flow) return failure(404, 'UnknownFlow', `this worker runs flow "${standbys.flow}"; ask a worker of flow "${params.flow}"`);
      return json(200, { standbys: standbys.copies });
    })
    .get('/flows/:flow/keys/:key', async ({ params, query }) => {
      const endpoint = o.keys();
      if (!endpoint) return failure(503, 'Starting', 'the worker is starting: ask again in a moment');
      const { flow } = endpoint;
      if (params.flow !== flow.name) return failure(404, 'UnknownFlow', `this worker runs flow "${flow.name}"; ask a worker of flow "${params.flow}"`);
      try {
        const topic = query.get('topic') ?? undefined;
        const partition = partitionParam(query.get('partition'));
        const key = params.key!;
        if (query.get('local') !== '1') return json(200, await queryKey(flow, { key, topic, partition }, endpoint.sources));
        // Asked as the owner by another worker or the CLI: this process's own answer, never forwarded.
        if (topic === undefined || partition === undefined) throw new KeyQueryError('local=1 needs topic and partition');
        const answer = await endpoint.answerLocally(topic, partition, key);
        if (!answer) throw new KeyNotFoundError(topic, partition, "not in this owner's memory or store");
        return json(200, answer satisfies KeyAnswer);
      } catch (err) {
        return keyFailure(err);
      }
    });
}

function partitionParam(value: string | null): number | undefined {
  if (value === null) return undefined;
  const n = Number(value);
  if (value === '' || !Number.isInteger(n) || n < 0) throw new KeyQueryError(`partition must be a partition number, got "${value}"`);
  return n;
}

/** The reply to a live state query that failed: 404 not found, 400 bad input, 409 not the owner; anything else is the router's 500. */
function keyFailure(err: unknown): HttpReply {
  if (err instanceof KeyNotFoundError) return failure(404, err.name, err.message);
  if (err instanceof KeyQueryError || err instanceof ConfigError) return failure(400, err.name, err.message);
  if (err instanceof NotOwnerHereError) return failure(409, err.name, err.message);
  throw err;
}
