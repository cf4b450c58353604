import type { Client } from '@temporalio/client';
import type { StandbyCopy } from '../../persistence/backends';
import type { Registry } from 'prom-client';
import type { HostPort } from '../../config/env';
import { anyPortOpen } from '../../config/net';
import type { Logger } from '../../core/logger';
import type { FlowDefinition } from '../../define-flow';
import { KafkaAdmin } from '../../kafka/admin';
import type { KafkaClient } from '../../kafka/client';
import { ownerAnswer } from '../keys/key-query';
import { keySources } from '../keys/key-sources';
import type { FlowRuntime } from '../runtime/flow-runtime';
import { cachedProbe } from './health';
import { type HttpServer, startHttpServer } from './server';
import { type KeyEndpoint, workerRouter } from './worker-routes';

export interface WorkerHttpOptions {
  readonly port: number;
  readonly host: string;
  readonly registry: Registry;
  /** Temporal core's own metrics, appended to `/metrics`. */
  readonly temporalCoreMetricsUrl?: string;
  /** KAFKA_BROKERS, for `/readyz`'s reachability check. */
  readonly brokers: readonly HostPort[];
  readonly log: Logger;
}

/** What the HTTP server answers from once the worker has them: its runtime, its Temporal client, a Kafka client for partition counts. */
export interface WorkerHttpParts {
  readonly definition: FlowDefinition<unknown, unknown>;
  readonly runtime: FlowRuntime;
  readonly temporal: Client;
  readonly kafka: KafkaClient;
  /** The standby copies this worker keeps (none without local state). */
  readonly standbys?: () => StandbyCopy[];
}

/**
 * A worker's one HTTP server: `/metrics`, `/healthz`, `/readyz` and the live state queries. It
 * starts first (so `/readyz` answers 503 from the first moment, and its address is known for the
 * first assignment signal); `attach` gives it the runtime and clients once they exist.
 */
export class WorkerHttp {
  private parts?: WorkerHttpParts & { admin: KafkaAdmin; keys: KeyEndpoint };

  private constructor(private readonly server: HttpServer) {}

  static async start(o: WorkerHttpOptions): Promise<WorkerHttp> {
    let http: WorkerHttp | undefined;
    const temporalReachable = cachedProbe(async () => {
      const connection = http?.parts?.temporal.connection;
      if (!connection) return false;
      await connection.withDeadline(Date.now() + 2_000, () => connection.workflowService.getSystemInfo({}));
      return true;
    });
    const router = workerRouter({
      registry: o.registry,
      temporalCoreMetricsUrl: o.temporalCoreMetricsUrl,
      readiness: {
        partitions: () => http?.parts?.runtime.partitionsReady(),
        kafkaReachable: cachedProbe(() => anyPortOpen(o.brokers)),
        temporalReachable,
      },
      keys: () => http?.parts?.keys,
      standbys: () => (http?.parts ? { flow: http.parts.definition.name, copies: http.parts.standbys?.() ?? [] } : undefined),
      // The error only (keys hashed unless logKeys, like every error this worker logs), never the request's URL.
      onError: (err) => o.log.warn({ err }, 'an HTTP request failed'),
    });
    http = new WorkerHttp(await startHttpServer(router, o.port, o.host, o.log));
    return http;
  }

  /** Where this machine reaches it (`http://127.0.0.1:9464`). */
  get url(): string {
    return this.server.url;
  }

  /** Where other workers and `get` reach it: recorded with this process's assignments (Owner.httpAddress). */
  get advertisedUrl(): string {
    return this.server.advertisedUrl;
  }

  attach(parts: WorkerHttpParts): void {
    const { definition, runtime, temporal } = parts;
    const httpAddress = this.advertisedUrl;
    const admin = new KafkaAdmin(parts.kafka); // connected on the first query
    const answerLocally: KeyEndpoint['answerLocally'] = async (topic, partition, key) =>
      ownerAnswer(definition.name, topic, partition, key, await runtime.lookupKey(topic, partition, key), httpAddress);
    const keys: KeyEndpoint = { flow: definition, answerLocally, sources: keySources({ definition, temporal, admin, self: { httpAddress, answer: answerLocally } }) };
    this.parts = { ...parts, admin, keys };
  }

  async close(): Promise<void> {
    await this.server.close();
    await this.parts?.admin.close().catch(() => undefined);
  }
}
