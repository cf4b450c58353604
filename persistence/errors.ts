import { KafkaFlowError } from '../config/errors';

/**
 * A conditional snapshot write was refused: the store already holds a newer offset for the key,
 * so another owner wrote after us. Nothing landed; the key keeps holding its old offset.
 */
export class SnapshotWriteConflict extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  readonly keys: readonly string[];
  constructor(topic: string, partition: number, keys: readonly string[], options?: { cause?: unknown }) {
    const shown = keys.slice(0, 5).map((k) => JSON.stringify(k)).join(', ');
    super(
      'SNAPSHOT_WRITE_CONFLICT',
      `the snapshot store refused ${keys.length} write(s) on topic "${topic}" partition ${partition} ` +
        `(keys ${shown}${keys.length > 5 ? ', …' : ''}) because it holds newer snapshots: another ` +
        'instance owns this partition now. This instance stops the partition; the owner carries on.',
      options,
    );
    this.topic = topic;
    this.partition = partition;
    this.keys = keys;
  }
}

/**
 * The writer was fenced: a newer consumer generation or producer epoch owns the partition (KIP-447),
 * or a store-level fence rejected us. Nothing from the fenced batch landed, neither writes nor the
 * offset commit; the partition must stop and leave recovery to the new owner.
 */
export class SnapshotWriteFenced extends KafkaFlowError {
  readonly topic: string;
  readonly partition: number;
  constructor(topic: string, partition: number, reason: string, options?: { cause?: unknown }) {
    super(
      'SNAPSHOT_WRITE_FENCED',
      `writes for topic "${topic}" partition ${partition} were fenced (${reason}): this instance no ` +
        'longer owns the partition. Nothing from the rejected batch landed; the new owner replays it.',
      options,
    );
    this.topic = topic;
    this.partition = partition;
  }
}
