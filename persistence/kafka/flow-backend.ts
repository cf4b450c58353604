/**
 * A flow's Kafka snapshot persistence across its input topics: one KafkaSnapshotBackend per input
 * topic (snapshots are keyed by partition number, so topics cannot share a snapshot topic or
 * transactional ids). A single-topic flow uses the plain defaults (`<groupId>-<flowName>-snapshots`,
 * `<groupId>-<flowName>`); a multi-topic flow gets the input topic in both names.
 */
import type { StandbyCopy } from '../backends';
import { ConfigError } from '../../config/errors';
import {
  type InspectedSnapshot,
  type KafkaPartitionAssignment,
  KafkaSnapshotBackend,
  type KafkaSnapshotBackendOptions,
} from './backend';
import type { KafkaPartitionPersistence } from './kafka-partition-persistence';
import { silentLogger } from '../../core/logger';
import { RestoreRound } from './restore-round';
import { defaultSnapshotTopic, defaultTransactionalIdPrefix } from './topic';

export interface KafkaFlowBackendOptions<S> extends Omit<KafkaSnapshotBackendOptions<S>, 'inputTopic' | 'deadLetterTopic'> {
  readonly topics: readonly string[];
  /** Each input topic's dead-letter topic, when the flow dead-letters. */
  readonly deadLetterTopics?: Readonly<Record<string, string>>;
}

export class KafkaFlowBackend<S, V = unknown> {
  readonly backends = new Map<string, KafkaSnapshotBackend<S, V>>();

  constructor(options: KafkaFlowBackendOptions<S>) {
    const { topics, deadLetterTopics, ...rest } = options;
    if (topics.length === 0) throw new ConfigError(`flow "${options.flowName}": no input topics`);
    const several = topics.length > 1;
    const restoreRound = options.localState ? new RestoreRound(options.flowName, options.logger ?? silentLogger) : undefined;
    if (several && (options.snapshotTopic !== undefined || options.transactionalIdPrefix !== undefined)) {
      throw new ConfigError(
        `flow "${options.flowName}" reads ${topics.length} topics: each needs its own snapshot topic and transactional ids, ` +
          'so persistence.snapshotTopic cannot be set (the defaults name the input topic)',
      );
    }
    for (const topic of topics) {
      this.backends.set(
        topic,
        new KafkaSnapshotBackend<S, V>({
          ...rest,
          restoreRound,
          inputTopic: topic,
          deadLetterTopic: deadLetterTopics?.[topic],
          snapshotTopic: several ? defaultSnapshotTopic(options.groupId, options.flowName, topic) : options.snapshotTopic,
          transactionalIdPrefix: several
            ? defaultTransactionalIdPrefix(options.groupId, options.flowName, topic)
            : options.transactionalIdPrefix,
        }),
      );
    }
  }

  forTopic(topic: string): KafkaSnapshotBackend<S, V> {
    const backend = this.backends.get(topic);
    if (!backend) throw new RangeError(`topic "${topic}" is not an input topic of this flow`);
    return backend;
  }

  forPartition(assignment: KafkaPartitionAssignment): Promise<KafkaPartitionPersistence<S, V>> {
    return this.forTopic(assignment.topic).forPartition(assignment);
  }

  /** Creates or checks every input topic's snapshot topic (see KafkaSnapshotBackend.ensureTopic). */
  async prepare(): Promise<void> {
    await Promise.all([...this.backends.values()].map((backend) => backend.ensureTopic()));
  }

  /** Every persisted key of every input topic (or of `topic`), optionally of one partition. */
  async *readAll(options: { topic?: string; partition?: number } = {}): AsyncIterable<InspectedSnapshot<S>> {
    const backends = options.topic !== undefined ? [this.forTopic(options.topic)] : [...this.backends.values()];
    for (const backend of backends) yield* backend.readAll(options.partition);
  }

  /** The partitions to keep standby copies of, by input topic (see KafkaSnapshotBackend.standby). */
  standby(tasks: Readonly<Record<string, readonly number[]>>): void {
    for (const [topic, backend] of this.backends) backend.standby(tasks[topic] ?? []);
  }

  /** The standby copies this worker keeps, of every input topic. */
  standbyStatus(): StandbyCopy[] {
    return [...this.backends.values()].flatMap((backend) => backend.standbyStatus());
  }

  /** Each local copy's checkpoint, by input topic and partition. */
  localCheckpoints(): Record<string, Record<string, string>> {
    return Object.fromEntries([...this.backends].map(([topic, backend]) => [topic, backend.localCheckpoints()]));
  }

  async close(): Promise<void> {
    for (const backend of this.backends.values()) await backend.close();
  }
}
