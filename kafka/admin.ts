/**
 * Topic administration for the project: create topics explicitly and wait until every partition
 * has a leader. (kafkajs retries only LEADER_NOT_AVAILABLE while KRaft answers
 * UNKNOWN_TOPIC_OR_PARTITION during auto-creation, so we never rely on auto-creation.)
 */
import { type Admin, ConfigResourceTypes } from 'kafkajs';
import { holdingKafkajsErrors, type KafkaClient } from './client';
import { createErrorFromCode } from './internals';

export interface TopicSpec {
  topic: string;
  partitions: number;
  replicationFactor?: number;
  /** Topic configs, e.g. { 'cleanup.policy': 'compact' }. */
  config?: Record<string, string>;
}

export interface TopicDescription {
  topic: string;
  partitions: number;
  config: Record<string, string>;
}

export class KafkaAdmin {
  private readonly admin: Admin;
  private connected = false;

  constructor(client: KafkaClient) {
    this.admin = client.kafka.admin();
  }

  async connect(): Promise<void> {
    if (!this.connected) await this.admin.connect();
    this.connected = true;
  }

  /** Creates the topics that do not exist yet, then waits until each partition has a leader. */
  async ensureTopics(specs: TopicSpec[], timeoutMs = 30_000): Promise<void> {
    await this.connect();
    const existing = new Set(await this.admin.listTopics());
    const missing = specs.filter((s) => !existing.has(s.topic));
    if (missing.length > 0) {
      try {
        // A concurrent creator (another worker of the flow starting at the same time) may win the
        // race: TOPIC_ALREADY_EXISTS is a normal outcome, logged nowhere; the leaders check below
        // decides. Any other refusal is logged at error level (kafkajs's entry) and raised.
        await holdingKafkajsErrors(
          isCreateTopicsRefusal,
          () =>
            this.admin.createTopics({
              waitForLeaders: false,
              topics: missing.map((s) => ({
                topic: s.topic,
                numPartitions: s.partitions,
                replicationFactor: s.replicationFactor ?? 1,
                configEntries: Object.entries(s.config ?? {}).map(([name, value]) => ({ name, value })),
              })),
            }),
          isTopicExists,
        );
      } catch (err) {
        if (!isTopicExists(err)) throw err;
      }
    }
    await this.waitForLeaders(specs, timeoutMs);
  }

  /**
   * An existing topic's partition count and the given configs (their effective values, defaults
   * included); undefined when the topic does not exist.
   */
  async describeTopic(topic: string, configNames: string[] = []): Promise<TopicDescription | undefined> {
    await this.connect();
    const existing = await this.admin.listTopics();
    if (!existing.includes(topic)) return undefined;
    const { topics } = await this.admin.fetchTopicMetadata({ topics: [topic] });
    const partitions = topics.find((t) => t.name === topic)?.partitions.length ?? 0;
    const config: Record<string, string> = {};
    if (configNames.length > 0) {
      const described = await this.admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames }],
      });
      for (const resource of described.resources) {
        for (const entry of resource.configEntries) config[entry.configName] = entry.configValue;
      }
    }
    return { topic, partitions, config };
  }

  async listTopics(): Promise<string[]> {
    await this.connect();
    return this.admin.listTopics();
  }

  async deleteTopics(topics: string[]): Promise<void> {
    await this.connect();
    await this.admin.deleteTopics({ topics, timeout: 10_000 });
  }

  async close(): Promise<void> {
    if (this.connected) await this.admin.disconnect();
    this.connected = false;
  }

  private async waitForLeaders(specs: TopicSpec[], timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let lastError: unknown;
    while (Date.now() < deadline) {
      try {
        // Not known yet, or no leader yet: what the loop waits out, logged nowhere (the timeout below says it).
        const { topics } = await holdingKafkajsErrors(
          isPropagatingMetadata,
          () => this.admin.fetchTopicMetadata({ topics: specs.map((s) => s.topic) }),
          isPropagating,
        );
        const ready = specs.every((spec) => {
          const meta = topics.find((t) => t.name === spec.topic);
          return (
            meta !== undefined &&
            meta.partitions.length === spec.partitions &&
            meta.partitions.every((p) => p.leader >= 0 && p.partitionErrorCode === 0)
          );
        });
        if (ready) return;
      } catch (err) {
        lastError = err; // UNKNOWN_TOPIC_OR_PARTITION while KRaft propagates the topic
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(
      `topics ${specs.map((s) => s.topic).join(', ')} have no leaders after ${timeoutMs} ms` +
        (lastError instanceof Error ? `: ${lastError.message}` : ''),
    );
  }
}

/** kafkajs's error entry of a CreateTopics response that refused a topic (which topic and why are only in the error it throws). */
function isCreateTopicsRefusal(log: { message?: unknown; error?: unknown }): boolean {
  return log.error === 'Topic creation errors' && typeof log.message === 'string' && log.message.startsWith('Response CreateTopics');
}

/** A topic just created and not yet everywhere: UNKNOWN_TOPIC_OR_PARTITION (3), LEADER_NOT_AVAILABLE (5). */
const PROPAGATING = new Map([3, 5].map((code) => [(createErrorFromCode(code) as { type?: string }).type, createErrorFromCode(code).message]));

/** kafkajs's error entry of a Metadata response for such a topic. */
function isPropagatingMetadata(log: { message?: unknown; error?: unknown }): boolean {
  return typeof log.message === 'string' && log.message.startsWith('Response Metadata') && [...PROPAGATING.values()].includes(String(log.error));
}

function isPropagating(err: unknown): boolean {
  return PROPAGATING.has((err as { type?: string }).type);
}

function isTopicExists(err: unknown): boolean {
  const e = err as { type?: string; errors?: Array<{ type?: string }> };
  if (e.type === 'TOPIC_ALREADY_EXISTS') return true;
  return Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((x) => x.type === 'TOPIC_ALREADY_EXISTS');
}
