/**
 * Shared helpers of the Kafka integration tests: the real broker from KAFKA_BROKERS, unique
 * names per test, bounded waits, and clients that are always closed.
 */
import { randomUUID } from 'node:crypto';
import { Socket } from 'node:net';
import type { Consumer, ConsumerConfig, EachBatchPayload } from 'kafkajs';
import { brokersFromEnv } from '../../../config/env';
import { createKafkaClient, type KafkaClient } from '../../../kafka/client';
import { type GroupGeneration, GroupMembership } from '../../../kafka/group-membership';

export function unique(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** Fails (never skips) when the broker does not answer, saying how to start it. */
export async function requireBroker(): Promise<string[]> {
  const brokers = brokersFromEnv();
  const [host, port] = (brokers[0] ?? '').split(':');
  const ok = await new Promise<boolean>((resolve) => {
    const socket = new Socket();
    const done = (result: boolean) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(2000, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(Number(port), host ?? '127.0.0.1', () => done(true));
  });
  if (!ok) {
    throw new Error(`Kafka does not answer at ${brokers.join(',')} (KAFKA_BROKERS). Start it with \`npm run infra:up\`.`);
  }
  return brokers;
}

export async function testClient(name: string): Promise<KafkaClient> {
  return createKafkaClient({ brokers: await requireBroker(), clientId: unique(name), logLevel: 'nothing' });
}

/** Polls `condition` every 50 ms until true, or fails after `timeoutMs` naming `what`. */
export async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return;
    await sleep(50);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

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

/**
 * Fills input partitions so committed offsets up to `count` are in range: a kafkajs member that
 * fetches from an offset past the log end resets it by committing the default offset (-2).
 */
export async function fillInput(client: KafkaClient, topic: string, partitions: number[], count: number): Promise<void> {
  const producer = client.kafka.producer();
  await producer.connect();
  try {
    for (const partition of partitions) {
      await producer.send({
        topic,
        messages: Array.from({ length: count }, (_, i) => ({ partition, key: `k${i}`, value: `v${i}` })),
      });
    }
  } finally {
    await producer.disconnect();
  }
}
