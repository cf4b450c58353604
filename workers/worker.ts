import { workflowSandboxOptions } from './bundle/workflow-sandbox';
import { type NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { formatHostPort, type HostPort, type WorkerEnv } from '../config/env';
import { describeKafkaSecurity, describeTemporalSecurity } from '../config/security';
import { anyPortOpen } from '../config/net';
import { createFlowActivities } from '../activities/flow-activities';
import type { FlowDefinition } from '../define-flow';
import { createBackend } from '../persistence/backends';
import { descriptorOf } from '../persistence/descriptors';
import { isKafkaConnectionFailure, KafkaUnreachableError } from './connect/errors';
import { checkKafkaLogin, kafkaAuthFailure } from './connect/kafka-login';
import { setLogKeys } from '../core/redact';
import { withoutBoundFields } from '../core/logger';
import { KafkaFlowConsumer } from './runtime/flow-consumer';
import { FlowRuntime } from './runtime/flow-runtime';
import { hasLocalState, standbyReplicasOf, stateCacheOf } from './runtime/local-state-config';
import type { MemberHints } from '../kafka/state-assignor';
import { TemporalPartitionSignals } from './runtime/partition-signals';
import { untilWorkflowWorkerQuiet } from './runtime/quiet-shutdown';
import { ShutdownRevokeSignals, temporalRevokeProbe, untilWorkflowTasksDone } from './runtime/shutdown-revokes';
import { createLogger, temporalCoreLogging, temporalLogger } from './observability/logger';
import { freePort } from './observability/metrics-server';
import { workerRegistry } from './observability/registry';
import { WorkerHttp } from './http/worker-http';
import { createKafkaClient } from '../kafka/client';
import { flowWorkflowTaskQueue, processTaskQueue } from './runtime/task-queues';
import { connectTemporal, type TemporalConnections } from './connect/temporal-connection';
import { loadWorkflowBundle } from './bundle/workflow-bundle';
import { workflowBundleBuilder } from './bundle/workflow-bundle-build';
import type * as Tracing from './observability/tracing';

export interface WorkerOptions {
  /** Port of the HTTP server (`/metrics`, `/healthz`, `/readyz`, live state queries); 0 picks a free one (logged); undefined: none. */
  metricsPort?: number;
  /** Address the HTTP server binds; default `env.metricsHost` (127.0.0.1). */
  metricsHost?: string;
  /** The environment, parsed (config/env `readWorkerEnv`). */
  env: WorkerEnv;
  /** The start-up's steps so far (the CLI marks its own loading); the `worker started` line shows them. */
  startup?: StartupMarks;
}

/** When each step of a worker's start-up was done, in ms since the process started (performance.now()). */
export class StartupMarks {
  private readonly marks: Record<string, number> = {};

  /** Marks `step` done now, or at `at` (the first time only); returns all marks so far. */
  mark(step: string, at = Math.round(performance.now())): Record<string, number> {
    this.marks[step] ??= at;
    return { ...this.marks };
  }
}

export interface RunningWorker {
  readonly taskQueue: string;
  readonly metricsUrl?: string;
  /** The HTTP server's base URL (`http://127.0.0.1:9464`), when it serves one. */
  readonly httpUrl?: string;
  /** Flush, commit, leave the group, stop the Temporal workers. */
  stop(): Promise<void>;
  /** Settles when the workers stop (rejects if one fails). */
  readonly done: Promise<void>;
}

let runtimeInstalled: string | undefined;

/** The activity worker's slots: 2 per owned partition (fold loop, persist reports) plus the short ones, for up to ≈ 2,000 partitions. */
export const ACTIVITY_SLOTS = 4_096;

/** How long a graceful stop waits for the partition workflows to handle its revokes. */
const REVOKES_HANDLED_TIMEOUT_MS = 10_000;

/**
 * One worker process for one flow: Temporal workers on the shared workflow task queue and on this
 * process's own activity task queue, plus the flow's Kafka group consumer.
 */
export async function runWorker(definition: FlowDefinition<unknown, unknown>, options: WorkerOptions): Promise<RunningWorker> {
  const { env } = options;
  const startup = options.startup ?? new StartupMarks();
  startup.mark('runWorker');
  const persistence = descriptorOf(definition.persistence.backend);
  // Checked before anything connects: a stateCache without local state is a ConfigError.
  const stateCache = stateCacheOf(definition, env);
  const standbyReplicas = standbyReplicasOf(definition, env);
  // With local state the group's assignment is sticky and prefers fresh local copies; it reads
  // the runtime and the backend, made below.
  let hints: () => MemberHints = () => ({ owned: {}, fresh: {} });
  // Cooperative rebalancing needs the state assignor (which withholds what another member still owns) with or without local state.
  const cooperative = (env.rebalance ?? definition.consumer.rebalance) === 'cooperative';
  const assignment = hasLocalState(definition, env) || cooperative ? { hints: () => hints(), standbyReplicas, cooperative } : undefined;
  const brokers = env.kafkaBrokers.map(formatHostPort);
  const log = createLogger({ flow: definition.name }, env.logLevel);
  // Keys and codec errors in logs and error messages only if the flow says so (core/redact).
  setLogKeys(definition.logKeys);
  // OpenTelemetry only when OTEL_* asks for it: off, none of its modules is loaded.
  const tracing = env.tracing
    ? (require('./observability/tracing') as typeof Tracing).startTracing(env.tracing, { 'kafka_flow.flow': definition.name }, log)
    : undefined;
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
  // Bundling the workflows costs seconds of CPU: the bundle is cached (KFT_WORKFLOW_BUNDLE_DIR) and
  // made or read while the connections below are opened.
  const workflowBundle = loadWorkflowBundle({
    workflowsPath: require.resolve('../workflows'),
    cacheDir: env.workflowBundleDir,
    build: workflowBundleBuilder(Runtime.instance().logger),
    workflowInterceptorModules: tracing?.workflowInterceptorModules,
    logger: log,
  });
  workflowBundle.catch(() => undefined); // awaited below; a start that fails earlier must not leave it unhandled
  let flowRuntimeCreated: FlowRuntime | undefined;
  const { registry, metrics } = workerRegistry(definition.name, () => flowRuntimeCreated?.partitionFigures());
  // The HTTP server answers from the start (`/healthz`; `/readyz` says what is not ready yet); the
  // flow's runtime and its live state queries join it once they exist. Its address goes with
  // this process's assignments to the partition workflows (Owner.httpAddress).
  const server =
    options.metricsPort !== undefined
      ? await WorkerHttp.start({
          port: options.metricsPort,
          host: options.metricsHost ?? env.metricsHost,
          registry,
          temporalCoreMetricsUrl: runtimeInstalled ? `http://${runtimeInstalled}/metrics` : undefined,
          brokers: env.kafkaBrokers,
          log,
        })
      : undefined;

  // Start-up is mostly waiting — on the brokers, on Temporal, and on the workflow worker's thread,
  // which loads the SDK and evaluates the workflow bundle (≈ 1 s of CPU, on the other core) — so
  // the independent steps overlap: the Kafka checks with the Temporal connections; the workflow
  // worker is created as soon as its connection is open; the activity worker and the group join
  // (which starts the partitions' recoveries, see FlowRuntime) while its thread starts. Errors keep
  // their precedence: an unreachable Kafka is reported before an unreachable Temporal.
  const kafkaChecked = (async () => {
    await assertKafkaReachable(env.kafkaBrokers);
    await checkKafkaLogin(brokers, env.security.kafka);
    await persistence.checkAtStart?.(definition, env, log);
    startup.mark('kafkaChecked');
  })();
  const temporalConnected = (async () => {
    const temporal = await connectTemporal(env, env.security.temporal);
    try {
      const connection = await temporal.connect();
      startup.mark('temporalConnected');
      return { temporal, connection };
    } catch (err) {
      await temporal.close().catch(() => undefined);
      throw err;
    }
  })();
  const workflowWorkerCreated = temporalConnected.then(async ({ temporal, connection }) => {
    const worker = await Worker.create({
      connection,
      namespace: temporal.namespace,
      taskQueue: flowWorkflowTaskQueue(definition.name),
      workflowBundle: { code: (await workflowBundle).code },
      // How long a workflow task waits for the worker that has the run cached before another takes
      // it, replaying the history (a worker that died; a graceful stop hands them over at once). The
      // owner folds and persists without its workflow, so only the workflow's reports wait. 2 s by
      // default: on a loaded worker more tasks time out and replay elsewhere than at the SDK's 10 s,
      // but a rebalance's workflows settle sooner (README, KFT_STICKY_TIMEOUT_MS).
      stickyQueueScheduleToStartTimeout: env.stickyTimeoutMs,
      // A partition workflow that cannot replay its own history fails (instead of retrying its task
      // forever, the partition stuck): the owner's runtime then starts a fresh run (reassertAfterMs),
      // which recovers the partition from its persisted state. See README, Self-healing.
      workflowFailureErrorTypes: { '*': ['NondeterminismError'] },
      // An activation's time bound, long enough for a process paused mid-activation (see there).
      ...workflowSandboxOptions,
      // Tracing: the workflow spans (made by the interceptors in the bundle) leave the sandbox here.
      ...(tracing ? { sinks: tracing.workflowSinks } : {}),
    });
    startup.mark('workflowWorkerCreated');
    return worker;
  });
  for (const p of [kafkaChecked, temporalConnected, workflowWorkerCreated]) p.catch(() => undefined); // awaited below
  try {
    await kafkaChecked;
  } catch (err) {
    await server?.close();
    await abandon(temporalConnected, workflowWorkerCreated);
    await tracing?.shutdown();
    throw err;
  }
  const backend = createBackend(definition, { brokers, kafkaSecurity: env.security.kafka, logger: withoutBoundFields(log, { flow: definition.name }), metrics, stateDir: env.stateDir, keysOnDemand: stateCache !== undefined, kafkaTransactionVersion: env.transactionVersion });
  // The snapshot topic's check (≈ 150 ms) starts now, while the Temporal workers start: the
  // partitions' recoveries (from the join on) wait for this same check instead of making their
  // own; the first assignment repeats it if it failed here.
  backend.prepare?.().catch((err) => log.debug({ err }, 'backend not prepared at start; the first assignment prepares it'));
  let temporal: TemporalConnections;
  let connection: NativeConnection;
  try {
    ({ temporal, connection } = await temporalConnected);
  } catch (err) {
    await server?.close();
    await backend.close().catch(() => undefined);
    await abandon(temporalConnected, workflowWorkerCreated);
    await tracing?.shutdown();
    throw err;
  }
  const taskQueue = processTaskQueue(definition.name);
  const signals = new ShutdownRevokeSignals(new TemporalPartitionSignals(temporal.client, log));
  /** Set once both Temporal workers run (below); the revoke point of a graceful stop calls it. */
  let stopWorkflowWorker: (() => Promise<void>) | undefined;
  const flowRuntime = new FlowRuntime({
    definition,
    httpAddress: server?.advertisedUrl,
    consumer: KafkaFlowConsumer.of(definition, brokers, env.security.kafka, log, assignment),
    signals,
    taskQueue,
    backend,
    metrics,
    logger: log,
    maxHistoryEvents: env.maxHistoryEvents,
    reassertAfterMs: env.reassertAfterMs,
    foldAtJoin: env.foldAtJoin,
    workflowReportEveryMs: env.workflowReportEveryMs,
    restoreReportEveryMs: env.restoreReportEveryMs,
    stateCache,
    // Folding at the join, the next owners fold from their own recoveries whatever the partitions'
    // workflows do: the member leaves at once (see the graceful stop below). Without it, their first
    // records wait for the workflows' tasks, so the workflow worker stops before the member leaves.
    beforeLeave: env.foldAtJoin ? undefined : () => stopWorkflowWorker?.() ?? Promise.resolve(),
  });
  flowRuntimeCreated = flowRuntime;
  hints = () => ({ owned: flowRuntime.heldPartitions(), fresh: backend.localCheckpoints?.() ?? {} });
  const activityWorkerCreated = Worker.create({
    connection,
    namespace: temporal.namespace,
    taskQueue,
    activities: createFlowActivities(new Map([[definition.name, flowRuntime]])),
    // Each owned partition holds two long-running activities here (its fold loop and its persist
    // reports): the SDK's default of 100 slots starved a worker of more than 50 partitions (their
    // recoveries timed out waiting for a slot; bench:scale). The slots of an idle activity cost
    // nothing: the bound is set far above any partition count a worker can carry.
    maxConcurrentActivityTaskExecutions: ACTIVITY_SLOTS,
    ...(tracing ? { interceptors: { activity: tracing.activityInterceptors } } : {}),
  }).then((w) => {
    startup.mark('activityWorkerCreated');
    return w;
  });
  activityWorkerCreated.catch(() => undefined);
  // Each Temporal worker polls as soon as it exists.
  const running = [workflowWorkerCreated, activityWorkerCreated].map((created) => created.then((w) => w.run()));
  const done = Promise.all(running).then(() => undefined);
  done.catch(() => undefined); // logged below once started; a failed start reports it itself
  server?.attach({
    definition,
    runtime: flowRuntime,
    temporal: temporal.client,
    kafka: createKafkaClient({ brokers, clientId: `${taskQueue}-keys`, logLevel: 'nothing', security: env.security.kafka, logger: log }),
    standbys: () => backend.standbyStatus?.() ?? [],
  });
  const consumerStarted = flowRuntime.start().then(
    () => startup.mark('joined'),
    (err) => {
      // The brokers took the connection but kept dropping it (a restart, a network fault) until
      // kafkajs gave up: one line naming KAFKA_BROKERS, exit 1, the process manager restarts it.
      const auth = kafkaAuthFailure(brokers, env.security.kafka, err);
      if (auth) throw auth;
      if (isKafkaConnectionFailure(err)) throw new KafkaUnreachableError(brokers, err);
      throw err;
    },
  );
  consumerStarted.catch(() => undefined);
  let workflowWorker: Worker;
  let activityWorker: Worker;
  try {
    [workflowWorker, activityWorker] = await Promise.all([workflowWorkerCreated, activityWorkerCreated, consumerStarted]);
  } catch (err) {
    // Leave the group (if joined) and stop what was created before the process exits on the error.
    await flowRuntime.stop(0).catch(() => undefined);
    await server?.close();
    await abandon(temporalConnected, workflowWorkerCreated, activityWorkerCreated);
    await tracing?.shutdown();
    throw err;
  }
  done.catch((err) => log.error({ err }, 'a Temporal worker stopped with an error'));
  log.info(
    {
      taskQueue,
      metrics: server ? `${server.url}/metrics` : undefined,
      http: server?.url,
      kafka: brokers,
      kafkaSecurity: describeKafkaSecurity(env.security.kafka),
      temporal: temporal.address,
      temporalSecurity: describeTemporalSecurity(env.security.temporal),
      ...persistence.describe?.(env),
      // ms since the process started at which each step of the start-up was done
      startup: startup.mark('started'),
    },
    'worker started',
  );

  // A graceful stop stops the workflow worker once the workflows told of the stop have handled it
  // (it may be the last worker polling their task queue: see runtime/shutdown-revokes.ts), between
  // two workflow tasks (runtime/quiet-shutdown.ts). Folding at the join (the default) it does so
  // after the member has left the group: the partitions' next owners fold from their recoveries at
  // once, while their workflows' tasks may still come here (it ran them last) — one that reaches
  // the worker as it shuts down is lost to the SDK until its 10 s start-to-close timeout, which
  // delays that partition's periodic persists, not its folding. Without folding at the join, before
  // the member leaves (the revoke point's beforeLeave): the next owners' signals then go elsewhere
  // instead of reaching a worker that is shutting down, since their first records wait for them. Once.
  let workflowWorkerStopping: Promise<void> | undefined;
  stopWorkflowWorker = () => {
    workflowWorkerStopping ??= (async () => {
      const signalled = signals.workflows();
      const waitStarted = performance.now();
      const probe = temporalRevokeProbe(temporal.client, temporal.namespace, (id) => signals.revokeOf(id));
      const unhandled = await untilWorkflowTasksDone(signalled, probe, REVOKES_HANDLED_TIMEOUT_MS);
      const waitedMs = Math.round(performance.now() - waitStarted);
      if (unhandled.length > 0) {
        log.warn({ workflows: unhandled, waitedMs }, 'stopping the Temporal workers before these partition workflows handled the revoke (the next worker will)');
      } else log.info({ workflows: signalled.length, waitedMs }, 'the partition workflows handled the revoke');
      const quietStarted = performance.now();
      const quiet = await untilWorkflowWorkerQuiet(workflowWorker);
      log.info({ quiet, waitedMs: Math.round(performance.now() - quietStarted) }, quiet ? 'workflow worker quiet: stopping it' : 'workflow worker still busy: stopping it anyway');
      if (workflowWorker.getState() === 'RUNNING') workflowWorker.shutdown();
    })();
    return workflowWorkerStopping;
  };

  let stopping: Promise<void> | undefined;
  return {
    taskQueue,
    metricsUrl: server ? `${server.url}/metrics` : undefined,
    httpUrl: server?.url,
    done,
    stop: () => {
      stopping ??= (async () => {
        log.info('stopping: flush, commit, leave the group');
        await flowRuntime.stop();
        await stopWorkflowWorker!(); // already done at the leave, unless the member held no partition
        if (activityWorker.getState() === 'RUNNING') activityWorker.shutdown();
        await done.catch(() => undefined);
        await server?.close();
        await temporal.close();
        // The spans of the stop itself (the revoke persists) included.
        await tracing?.shutdown();
        log.info('stopped');
      })();
      return stopping;
    },
  };
}

/**
 * A start that failed part way: stops the Temporal workers that were created (they poll as soon
 * as they are) and closes the connections, so the process exits on its error and nothing else.
 */
async function abandon(
  temporalConnected: Promise<{ temporal: TemporalConnections }>,
  ...workersCreated: Array<Promise<Worker>>
): Promise<void> {
  const settled = await Promise.allSettled(workersCreated);
  for (const s of settled) {
    if (s.status === 'fulfilled' && s.value.getState() === 'RUNNING') {
      try {
        s.value.shutdown();
      } catch {
        // already stopping
      }
    }
  }
  const temporal = await temporalConnected.then((t) => t.temporal, () => undefined);
  await temporal?.close().catch(() => undefined);
}

/** Fails fast (instead of after kafkajs's retries) when no broker accepts a connection. */
async function assertKafkaReachable(brokers: HostPort[]): Promise<void> {
  if (!(await anyPortOpen(brokers, 3000))) throw new KafkaUnreachableError(brokers.map(formatHostPort));
}
