/**
 * The real servers the integration tests run on, and the set-up every integration file shares:
 * the servers' addresses (the CLI's variables), unique names, a failure (never a skip) when a
 * server does not answer, cleanups that all run, a test's Kafka (`kafkaScope`: a client, an admin,
 * topics deleted after, group members, a proxy), a Cassandra keyspace dropped after
 * (`cassandraScope`), Temporal histories, and the CLI run as a command or as a worker process.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client as TemporalClient, Connection } from '@temporalio/client';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { msToTs } from '@temporalio/common/lib/time';
import { Client as CassandraClient } from 'cassandra-driver';
import type { Consumer, ConsumerConfig, EachBatchPayload, ISocketFactory, Message } from 'kafkajs';
import { TcpProxy } from '../../chaos/tcp-proxy';
import { formatHostPort, readEnv } from '../../config/env';
import { KafkaAdmin, type TopicSpec } from '../../kafka/admin';
import { createKafkaClient, type KafkaClient, newKafka } from '../../kafka/client';
import { type GroupGeneration, GroupMembership } from '../../kafka/group-membership';
import { searchAttributes } from '../../workflows/search-attributes';
import { captureOutput } from './captured-child';
import { eventually } from './eventually';

/** Addresses of the real servers the integration tests talk to (same variables as the CLI). */
export const env = readEnv();
export const kafkaBrokers = env.kafkaBrokers.map(formatHostPort);
export const temporalAddress = formatHostPort(env.temporalAddress);
export const temporalNamespace = env.temporalNamespace;
export const cassandraContactPoints = env.cassandraContactPoints.map(formatHostPort);

/** A name no other test (or earlier run) uses: topics, groups, task queues, keyspaces. */
export const unique = (prefix: string): string => `${prefix}-${randomUUID().slice(0, 8)}`;

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `condition` every 50 ms until true, or fails after `timeoutMs` naming `what`. */
export async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return;
    await sleep(50);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

/** Runs every cleanup, even when one throws. */
export async function closeAll(...closers: Array<(() => Promise<unknown>) | undefined>): Promise<void> {
  for (const close of closers) {
    try {
      await close?.();
    } catch {
      // keep closing the rest
    }
  }
}

function splitHostPort(hp: string): [string, number] {
  const i = hp.lastIndexOf(':');
  return [hp.slice(0, i).replace(/^\[|\]$/g, '') || '127.0.0.1', Number(hp.slice(i + 1))];
}

/** Fails (never skips) when nothing answers at `addresses[0]`, saying how to start the server. */
async function requireServer(name: string, addresses: readonly string[], variable: string): Promise<void> {
  const [host, port] = splitHostPort(addresses[0] ?? '');
  const ok = await new Promise<boolean>((resolve) => {
    const socket = new net.Socket();
    const done = (result: boolean) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(2000, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(port, host, () => done(true));
  });
  if (!ok) throw new Error(`${name} does not answer at ${addresses.join(',')} (${variable}). Start it with \`npm run infra:up\`.`);
}

/** The brokers (KAFKA_BROKERS), once one answers. */
export async function requireBroker(): Promise<string[]> {
  await requireServer('Kafka', kafkaBrokers, 'KAFKA_BROKERS');
  return kafkaBrokers;
}

export function requireCassandra(contactPoints: readonly string[] = cassandraContactPoints): Promise<void> {
  return requireServer('Cassandra', contactPoints, 'CASSANDRA_CONTACT_POINTS');
}

// ---------- Kafka ----------

/** A client of the real broker, quiet, with a client id of its own. */
export async function testClient(name: string): Promise<KafkaClient> {
  return createKafkaClient({ brokers: await requireBroker(), clientId: unique(name), logLevel: 'nothing' });
}

/** Settings that make rebalances in tests take well under a second or two. */
export const fastGroup = {
  sessionTimeout: 10_000,
  rebalanceTimeout: 20_000,
  heartbeatInterval: 300,
  maxWaitTimeInMs: 200,
} satisfies Partial<ConsumerConfig>;

export interface RunningMember {
  consumer: Consumer;
  membership: GroupMembership;
}

/** A group member consuming `topic` (eachBatch given or a no-op), tracked by a GroupMembership. */
export async function startMember(
  client: KafkaClient,
  config: ConsumerConfig,
  topic: string,
  hooks: {
    eachBatch?: (payload: EachBatchPayload) => Promise<void>;
    /** Registered before the member starts, so it sees the first join too. */
    onJoin?: (generation: GroupGeneration) => void;
  } = {},
): Promise<RunningMember> {
  const consumer = client.kafka.consumer({ ...fastGroup, ...config });
  const membership = new GroupMembership();
  membership.attach(consumer);
  if (hooks.onJoin) membership.onJoin(hooks.onJoin);
  const eachBatch = hooks.eachBatch ?? (async () => {});
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  await consumer.run({ autoCommit: false, eachBatch });
  return { consumer, membership };
}

/**
 * Fills input partitions so committed offsets up to `count` are in range: a kafkajs member that
 * fetches from an offset past the log end resets it by committing the default offset (-2).
 */
export async function fillInput(client: KafkaClient, topic: string, partitions: number[], count: number): Promise<void> {
  await send(client, topic, partitions.flatMap((partition) => Array.from({ length: count }, (_, i) => ({ partition, key: `k${i}`, value: `v${i}` }))));
}

/** Sends `messages` to `topic` (one send) with a producer of its own. */
export async function send(client: KafkaClient, topic: string, messages: Message[]): Promise<void> {
  // Idempotent: kafkajs retries a whole produce request when one partition of it fails (a leader
  // not known yet on a topic just created, a busy broker), and without sequence numbers the
  // partitions whose part had landed would hold those records twice — later in the log than
  // records with later timestamps (an event-time test then sees them as late).
  const producer = client.kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  try {
    await producer.send({ topic, messages });
  } finally {
    await producer.disconnect();
  }
}

/** A topic created with `partitions` on the real broker, holding `messages` (a test's input). */
export async function topicWith(topic: string, partitions: number, messages: Message[], config?: Record<string, string>): Promise<void> {
  const client = await testClient(`${topic}-input`);
  const admin = new KafkaAdmin(client);
  try {
    await admin.ensureTopics([{ topic, partitions, ...(config ? { config } : {}) }]);
  } finally {
    await admin.close();
  }
  await send(client, topic, messages);
}

export type KafkaScope = ReturnType<typeof kafkaScope>;

/**
 * A test file's Kafka on the real broker: a client and an admin made before each test (or once
 * before the file's, `per: 'file'`); topics named and created through it are deleted after it,
 * and whatever is `defer`red (members, backends, proxies …) is closed first, last first, each
 * even when another throws.
 */
export function kafkaScope(name: string, { per = 'test' }: { per?: 'test' | 'file' } = {}) {
  let client: KafkaClient | undefined;
  let admin: KafkaAdmin | undefined;
  const topics: string[] = [];
  const deferred: Array<() => Promise<unknown>> = [];
  (per === 'file' ? beforeAll : beforeEach)(async () => {
    client = await testClient(name);
    admin = new KafkaAdmin(client);
  });
  (per === 'file' ? afterAll : afterEach)(async () => {
    const a = admin;
    const named = topics.splice(0);
    const deleteCreated = async () => {
      const existing = new Set(a ? await a.listTopics() : []);
      const created = named.filter((t) => existing.has(t));
      if (created.length > 0) await a?.deleteTopics(created);
    };
    await closeAll(...deferred.splice(0).reverse(), deleteCreated, async () => a?.close());
  });
  const scope = {
    get client(): KafkaClient {
      if (!client) throw new Error('kafkaScope: no client outside a test');
      return client;
    },
    get admin(): KafkaAdmin {
      if (!admin) throw new Error('kafkaScope: no admin outside a test');
      return admin;
    },
    /** Topics deleted after the test, those that exist then (the code under test may create them). */
    deleteAfter(...names: string[]): void {
      for (const topic of names) if (!topics.includes(topic)) topics.push(topic);
    },
    /** A unique topic name, the topic deleted after the test if it was created (by the code under test). */
    topicName(prefix: string): string {
      const topic = unique(prefix);
      scope.deleteAfter(topic);
      return topic;
    },
    /** A unique topic created now, deleted after the test. */
    async topic(prefix: string, partitions: number, config?: TopicSpec['config']): Promise<string> {
      const topic = scope.topicName(prefix);
      await scope.admin.ensureTopics([{ topic, partitions, ...(config ? { config } : {}) }]);
      return topic;
    },
    /** Closed after the test, before its topics are deleted (last deferred, first closed). */
    defer(close: () => Promise<unknown>): void {
      deferred.push(close);
    },
    /** A group member (startMember) of the scope's client, disconnected after the test. */
    async member(config: ConsumerConfig, topic: string, hooks?: Parameters<typeof startMember>[3]): Promise<RunningMember> {
      const m = await startMember(scope.client, config, topic, hooks);
      scope.defer(() => m.consumer.disconnect());
      return m;
    },
    /** A proxy in front of the broker (kafkaProxy), closed after the test. */
    async proxy(): Promise<TcpProxy> {
      const proxy = await kafkaProxy(scope.client);
      scope.defer(() => proxy.close());
      return proxy;
    },
  };
  return scope;
}

/**
 * A started proxy in front of `client`'s first broker that follows Kafka requests (chaos/tcp-proxy.ts:
 * `arm` a trigger, `refuse` connections); `proxiedClient` connects through it.
 */
export async function kafkaProxy(client: KafkaClient): Promise<TcpProxy> {
  const [host, port] = splitHostPort(client.brokers[0]!);
  const proxy = new TcpProxy('kafka', 0, { host, port }, '127.0.0.1', true);
  await proxy.start();
  return proxy;
}

/**
 * `client` with its kafkajs instance (producers, group consumers, admin) connected through
 * `proxy`; the group-less readers built on `client.brokers` still connect directly. The broker
 * advertises its own address in metadata, so a client merely bootstrapped through the proxy would
 * connect to the broker directly afterwards: every connection goes to the proxy instead, whatever
 * broker address it asks for (plaintext listeners: TLS is not proxied).
 */
export function proxiedClient(client: KafkaClient, proxy: TcpProxy, options: { requestTimeout?: number } = {}): KafkaClient {
  const socketFactory: ISocketFactory = ({ onConnect }) => net.connect({ host: '127.0.0.1', port: proxy.port }, onConnect);
  const kafka = newKafka({
    brokers: [`127.0.0.1:${proxy.port}`],
    clientId: `${client.clientId}-proxied`,
    logLevel: client.logLevel,
    logCreator: client.logCreator,
    socketFactory,
    ...client.connection,
    ...(options.requestTimeout !== undefined ? { requestTimeout: options.requestTimeout } : {}),
  });
  return { ...client, kafka };
}

// ---------- Cassandra ----------

/** A keyspace name no other test uses. */
export function keyspaceName(prefix: string): string {
  return unique(prefix).replace(/-/g, '_').toLowerCase();
}

/** A plain driver client for raw CQL in tests (the caller shuts it down). */
export async function rawClient(contactPoints: readonly string[] = cassandraContactPoints): Promise<CassandraClient> {
  await requireCassandra(contactPoints);
  const client = new CassandraClient({ contactPoints: [...contactPoints], localDataCenter: 'datacenter1' });
  await client.connect();
  return client;
}

export async function dropKeyspace(keyspace: string): Promise<void> {
  const client = new CassandraClient({ contactPoints: [...cassandraContactPoints], localDataCenter: 'datacenter1' });
  try {
    await client.connect();
    await client.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`);
  } finally {
    await client.shutdown().catch(() => undefined);
  }
}

/**
 * A test file's keyspace on the real Cassandra (`<prefix>_…`), dropped after the file, and a raw
 * client for CQL; whatever is `defer`red (backends …) is closed before, last first.
 */
export function cassandraScope(prefix: string) {
  const keyspace = keyspaceName(prefix);
  let raw: CassandraClient | undefined;
  const deferred: Array<() => Promise<unknown>> = [];
  beforeAll(async () => {
    raw = await rawClient();
  });
  afterAll(async () => {
    await closeAll(...deferred.splice(0).reverse(), async () => raw?.shutdown(), () => dropKeyspace(keyspace));
  });
  return {
    keyspace,
    get raw(): CassandraClient {
      if (!raw) throw new Error('cassandraScope: no client outside a test');
      return raw;
    },
    /** Closed after the file, before the keyspace is dropped (last deferred, first closed). */
    defer(close: () => Promise<unknown>): void {
      deferred.push(close);
    },
  };
}

// ---------- Temporal ----------

/** Every string of a workflow history, payloads decoded as UTF-8 text (they are JSON). */
export async function historyText(workflowId: string): Promise<string> {
  const connection = await Connection.connect({ address: temporalAddress });
  try {
    const history = await new TemporalClient({ connection, namespace: temporalNamespace }).workflow.getHandle(workflowId).fetchHistory();
    return JSON.stringify(history, (_k, v) => (v instanceof Uint8Array ? Buffer.from(v).toString('utf8') : v));
  } finally {
    await connection.close();
  }
}

/**
 * A namespace of its own with the flow's search attributes: the workflow task queue is shared by
 * every worker of every flow in a namespace, so in `default` another test's (or another
 * checkout's) worker could answer its queries or run its workflow tasks.
 */
export async function freshNamespace(prefix: string): Promise<string> {
  const namespace = unique(prefix);
  const c = await Connection.connect({ address: temporalAddress });
  try {
    await c.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
    await eventually('the namespace exists', () => c.workflowService.describeNamespace({ namespace }).then(() => true), 30_000);
    await c.operatorService.addSearchAttributes({
      namespace,
      searchAttributes: Object.fromEntries(Object.values(searchAttributes).map((k) => [k.name, encodeSearchAttributeIndexedValueType(k.type)!])),
    });
  } finally {
    await c.close();
  }
  return namespace;
}

// ---------- the CLI ----------

const run = promisify(execFile);
const ROOT = path.resolve(__dirname, '..', '..');
/** The `kafka-flow-temporal` executable. */
export const CLI = path.join(ROOT, 'bin', 'kafka-flow-temporal.js');

/** `kafka-flow-temporal <args>` run to its end (killed after `timeoutMs`), env `inherit` + `env`: its exit code and output. */
export async function runCli(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  { timeoutMs = 60_000, inherit = process.env }: { timeoutMs?: number; inherit?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number; out: string }> {
  try {
    const r = await run(process.execPath, [CLI, ...args], { env: { ...inherit, ...env }, timeout: timeoutMs });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

export interface RunningCli {
  readonly child: ChildProcess;
  /** What it printed so far (stdout and stderr as they came). */
  output(): string;
  /** SIGTERM, SIGKILL after 60 s; its exit code. */
  stop(): Promise<number | null>;
}

/** `kafka-flow-temporal <args>` started (a worker), env `inherit` + `env`, its output captured. */
export function startCli(args: string[], env: NodeJS.ProcessEnv = {}, inherit: NodeJS.ProcessEnv = process.env): RunningCli {
  const child = spawn(process.execPath, [CLI, ...args], { env: { ...inherit, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const { output, exited } = captureOutput(child);
  return {
    child,
    output,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
