/**
 * Caching mode: a plain shared producer writes the records; the offset is then committed by the
 * consumer (with its own generation) after the writes it covers. Unfenced: a stale owner's
 * snapshots land (kafka-flow #732), only its offset commit is refused.
 */
import { SnapshotWriteFencedError } from '../../core/fence-errors';
import type { WriteBatch, WriteBatchResult } from '../../flow/ports';
import { fenceReason, protocolErrorType, type SentRecords } from '../../kafka/errors';
import type { SnapshotMessage } from '../../kafka/transactional-writer';
import type { OffsetCommitter } from '../offset-committer';
import type { OutputSender } from '../output-sender';
import { allApplied } from './snapshot-batch';
import type { LocalStateManager } from './local-state-manager';
import { SnapshotWriter, type WriterContext } from './snapshot-writer';

/** The shared plain producer of caching mode (PlainWriter). */
export interface SnapshotSender {
  send(messages: readonly SnapshotMessage[]): Promise<SentRecords[]>;
}

export interface CachingWriterParts {
  readonly sender: SnapshotSender;
  /** Produces outputs (dead letters) before the snapshots: at least once. */
  readonly outputSender?: OutputSender;
  /** Commits the input offset with the consumer's generation. */
  readonly committer: OffsetCommitter;
  /** The local state store, mirroring every landed write (docs/local-state.md). */
  readonly mirror?: LocalStateManager;
}

export class CachingSnapshotWriter<S, V> extends SnapshotWriter<S, V> {
  constructor(
    c: WriterContext<S>,
    private readonly p: CachingWriterParts,
  ) {
    super(c);
  }

  async write(batch: WriteBatch<S, V>): Promise<WriteBatchResult> {
    if (this.fence) throw this.fence;
    const { input } = this.c;
    const prepared = this.prepare(batch);
    const started = performance.now();
    if (prepared.outputs.length > 0) {
      if (!this.p.outputSender) throw new TypeError('caching mode without an output sender cannot produce dead letters');
      await this.p.outputSender.send(prepared.outputs, input);
    }
    if (prepared.messages.length > 0) {
      let sent: SentRecords[];
      try {
        sent = await this.p.sender.send(prepared.messages);
      } catch (err) {
        this.c.metrics?.transactions.inc({ ...this.labels, outcome: 'failed' });
        throw err;
      }
      this.applyLanded(prepared, sent, this.p.mirror);
      this.c.metrics?.transactions.inc({ ...this.labels, outcome: 'committed' });
    }
    this.count(prepared, started);
    const statuses = allApplied(batch.writes);
    const { sizes } = prepared;
    if (batch.commitOffset === undefined) return { statuses, committed: false, sizes };
    try {
      await this.p.committer.commit(input, batch.commitOffset);
      return { statuses, committed: true, sizes };
    } catch (err) {
      const reason = fenceReason(err);
      const failure = reason
        ? this.onFence(
            new SnapshotWriteFencedError(input.topic, input.partition, `${protocolErrorType(err) ?? 'fenced'} on the consumer's offset commit`, {
              reason,
              cause: err,
            }),
          )
        : err;
      if (batch.writes.length === 0) throw failure;
      return { statuses, committed: false, commitError: failure, sizes };
    }
  }
}
