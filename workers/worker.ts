import { Runtime, Worker } from '@temporalio/worker';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { formatHostPort, type HostPort, type WorkerEnv } from '../config/env';
import { portOpen } from '../config/net';
import { createFlowActivities } from '../activities/flow-activities';
import type { FlowDefinition } from '../define-flow';
import { FlowMetrics } from '../flow/metrics';
import { createBackend } from '../persistence/backends';
import { isKafkaConnectionFailure, KafkaUnreachableError } from './errors';
import { KafkaFlowConsumer } from './flow-consumer';
import { FlowRuntime } from './flow-runtime';
import { TemporalPartitionSignals } from './partition-signals';
import { createLogger, temporalCoreLogging, temporalLogger } from './logger';
import { freePort, startMetricsServer } from './metrics-server';
import { processTaskQueue, WORKFLOW_TASK_QUEUE } from './task-queues';
import { connectTemporal } from './temporal-connection';

export interface WorkerOptions {
  /** Port of `/metrics`; 0 picks a free one (logged); undefined: no metrics endpoint. */
  metricsPort?: number;
  /** The environment, parsed (config/env `readWorkerEnv`). */
  env: WorkerEnv;
}

export interface RunningWorker {
  readonly taskQueue: string;
  readonly metricsUrl?: string;
  /** Flush, commit, leave the group, stop the Temporal workers. */
  stop(): Promise<void>;
  /** Settles when the workers stop (rejects if one fails). */
  readonly done: Promise<void>;
}

let runtimeInstalled: string | undefined;

/**
 * One worker process for one flow: Temporal workers on the shared workflow task queue and on this
 * process's own activity task queue, plus the flow's Kafka group consumer.
 */
export async function runWorker(definition: FlowDefinition<unknown, unknown>, options: WorkerOptions): Promise<RunningWorker> {
  const { env } = options;
  const brokers = env.kafkaBrokers.map(formatHostPort);
  const log = createLogger({ flow: definition.name }, env.logLevel);
  if (runtimeInstalled === undefined) {
    // Once per process, before any connection. We handle SIGTERM/SIGINT ourselves (flush, commit,
    // leave the group, then stop the workers), so the SDK must not stop the workers on its own.
    // Temporal core serves its metrics on a private port; /metrics appends them to ours. Its logs
    // are forwarded to the same pino logger as the SDK's (one log format on stderr).
    runtimeInstalled = options.metricsPort !== undefined ? `127.0.0.1:${await freePort()}` : '';
    Runtime.install({
      logger: temporalLogger(log, env.temporalLogLevel),
      shutdownSignals: [],
      telemetryOptions: {
        logging: temporalCoreLogging(env.temporalLogLevel),
        ...(runtimeInstalled ? { metrics: { prometheus: { bindAddress: runtimeInstalled } } } : {}),
      },
    });
  }
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const metrics = FlowMetrics.of(registry);

  await assertKafkaReachable(env.kafkaBrokers);
  const temporal = await connectTemporal(env);
  const taskQueue = processTaskQueue(definition.name);
  const connection = await temporal.connect();
  const runtime = new FlowRuntime({
    definition,
    consumer: new KafkaFlowConsumer(definition, brokers, log),
    signals: new TemporalPartitionSignals(temporal.client),
    taskQueue,
    backend: createBackend(definition, { brokers, logger: log, metrics, stateDir: env.stateDir }),
    metrics,
    logger: log,
    maxHistoryEvents: env.maxHistoryEvents,
    reassertAfterMs: env.reassertAfterMs,
  });
  const workflowWorker = await Worker.create({
    connection,
    namespace: temporal.namespace,
    taskQueue: WORKFLOW_TASK_QUEUE,
    workflowsPath: require.resolve('../workflows'),
    // A workflow cached on a worker that died is handed to another after this long (default 10 s).
    stickyQueueScheduleToStartTimeout: '2 seconds',
    // A partition workflow that cannot replay its own history fails (instead of retrying its task
    // forever, the partition stuck): the owner's runtime then starts a fresh run (reassertAfterMs),
    // which recovers the partition from its persisted state. See README, Self-healing.
    workflowFailureErrorTypes: { '*': ['NondeterminismError'] },
  });
  const activityWorker = await Worker.create({
    connection,
    namespace: temporal.namespace,
    taskQueue,
    activities: createFlowActivities(new Map([[definition.name, runtime]])),
  });
  const done = Promise.all([workflowWorker.run(), activityWorker.run()]).then(() => undefined);
  done.catch((err) => log.error({ err }, 'a Temporal worker stopped with an error'));
  try {
    await runtime.start();
  } catch (err) {
    // The brokers took the connection but kept dropping it (a restart, a network fault) until
    // kafkajs gave up: one line naming KAFKA_BROKERS, exit 1, the process manager restarts it.
    if (isKafkaConnectionFailure(err)) throw new KafkaUnreachableError(brokers, err);
    throw err;
  }
  const server =
    options.metricsPort !== undefined
      ? await startMetricsServer(registry, options.metricsPort, runtimeInstalled ? `http://${runtimeInstalled}/metrics` : undefined)
      : undefined;
  log.info({ taskQueue, metrics: server?.url, kafka: brokers, temporal: temporal.address }, 'worker started');

  let stopping: Promise<void> | undefined;
  return {
    taskQueue,
    metricsUrl: server?.url,
    done,
    stop: () => {
      stopping ??= (async () => {
        log.info('stopping: flush, commit, leave the group');
        await runtime.stop();
        for (const w of [activityWorker, workflowWorker]) if (w.getState() === 'RUNNING') w.shutdown();
        await done.catch(() => undefined);
        await server?.close();
        await temporal.close();
        log.info('stopped');
      })();
      return stopping;
    },
  };
}

export { WORKFLOW_TASK_QUEUE };

/** Fails fast (instead of after kafkajs's retries) when no broker accepts a connection. */
async function assertKafkaReachable(brokers: HostPort[]): Promise<void> {
  const answers = await Promise.all(brokers.map((b) => portOpen(b.host, b.port, 3000)));
  if (!answers.some(Boolean)) throw new KafkaUnreachableError(brokers.map(formatHostPort));
}
