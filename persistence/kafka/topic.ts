/**
 * The snapshot topic: compacted, one partition per input partition (snapshot partition p holds
 * input partition p's keys), created explicitly. An existing topic that does not fit is an error
 * at start, never silently used.
 */
import type { KafkaAdmin } from '../../kafka/admin';
import { SnapshotTopicMismatchError } from './errors';

/** `<groupId>-<flowName>-snapshots`; a flow reading several topics gets one per topic. */
export function defaultSnapshotTopic(groupId: string, flowName: string, inputTopic?: string): string {
  return inputTopic === undefined ? `${groupId}-${flowName}-snapshots` : `${groupId}-${flowName}-${inputTopic}-snapshots`;
}

/** `<groupId>-<flowName>` (the transactional.id of partition p is `<prefix>-snapshot-<p>`). */
export function defaultTransactionalIdPrefix(groupId: string, flowName: string, inputTopic?: string): string {
  return inputTopic === undefined ? `${groupId}-${flowName}` : `${groupId}-${flowName}-${inputTopic}`;
}

export interface SnapshotTopicSpec {
  topic: string;
  partitions: number;
  /** Default 1 (a development broker); use 3 with min.insync.replicas=2 in production. */
  replicationFactor?: number;
  /** Extra topic configs for creation (e.g. min.insync.replicas). */
  config?: Record<string, string>;
}

/** The problems of an existing topic, or none. */
export function snapshotTopicProblems(spec: SnapshotTopicSpec, actual: { partitions: number; config: Record<string, string> }): string[] {
  const problems: string[] = [];
  if (actual.partitions !== spec.partitions) {
    problems.push(`it has ${actual.partitions} partition(s), the input topic has ${spec.partitions}`);
  }
  const policy = actual.config['cleanup.policy'];
  if (policy !== 'compact') problems.push(`its cleanup.policy is "${policy ?? 'unknown'}", not "compact"`);
  return problems;
}

/** Creates the topic if missing (compacted), or checks the existing one. */
export async function ensureSnapshotTopic(admin: KafkaAdmin, spec: SnapshotTopicSpec): Promise<'created' | 'exists'> {
  const existing = await admin.describeTopic(spec.topic, ['cleanup.policy']);
  if (existing) {
    const problems = snapshotTopicProblems(spec, existing);
    if (problems.length > 0) throw new SnapshotTopicMismatchError(spec.topic, problems);
    return 'exists';
  }
  await admin.ensureTopics([
    {
      topic: spec.topic,
      partitions: spec.partitions,
      replicationFactor: spec.replicationFactor ?? 1,
      config: { ...spec.config, 'cleanup.policy': 'compact' },
    },
  ]);
  // A concurrent creator may have won with other settings: check what is there now.
  const created = await admin.describeTopic(spec.topic, ['cleanup.policy']);
  const problems = created ? snapshotTopicProblems(spec, created) : ['it vanished right after creation'];
  if (problems.length > 0) throw new SnapshotTopicMismatchError(spec.topic, problems);
  return 'created';
}
