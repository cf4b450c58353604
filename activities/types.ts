/**
 * The contract between a partition workflow and the activities that run on its owner's process.
 * Types only: the workflow bundle imports this file (`import type`), so nothing here may pull in
 * Node modules.
 */

export interface PartitionRef {
  readonly flow: string;
  readonly topic: string;
  readonly partition: number;
}

/** Who owns a partition: a consumer-group member in one generation, reachable on its own task queue. */
export interface Owner {
  readonly generation: number;
  readonly memberId: string;
  /** The owning process's own activity task queue (worker-specific task queues). */
  readonly taskQueue: string;
  /**
   * The owning process's fold loop may be scheduled together with the recovery: it waits in the
   * process for the recovery it names (`FoldLoopRequest.afterRecovery`) before folding. Processes
   * that predate it leave it out, and their partitions are recovered, then folded, as before.
   */
  readonly foldAwaitsRecovery?: boolean;
  /**
   * The owning process's HTTP base URL (`http://host:port`), when it serves one: where a key's live
   * state is asked for (`GET /flows/<flow>/keys/<key>`). Processes without an HTTP port, and those
   * that predate it, leave it out. An address only: no key or value ever goes here.
   */
  readonly httpAddress?: string;
}

export interface RecoverRequest extends PartitionRef {
  readonly owner: Owner;
  /**
   * The same process owned the partition in this earlier generation and nobody else owned it
   * since: it may keep its in-memory state instead of reading the store again.
   */
  readonly keepFromGeneration?: number;
  /** Names this recovery for a fold loop scheduled with it (FoldLoopRequest.afterRecovery). */
  readonly recovery?: string;
}

export interface RecoverResult {
  readonly fromMemory: boolean;
  readonly keys: number;
  readonly snapshotsRead: number;
  readonly ms: number;
  /** The committed input offset the partition resumes from, as kafkajs spells offsets. */
  readonly committedOffset?: string;
  /** Local state on (docs/local-state.md): keys taken from the local store. */
  readonly fromLocal?: number;
  /** Local state on: records read from the snapshot topic (the delta after the checkpoint, or all). */
  readonly fromTopic?: number;
  /** Local state on: `delta` (local copy plus the records after its checkpoint) or `full`. */
  readonly restore?: 'delta' | 'full';
  /** Local state on, full restore: why (no checkpoint, or why the local copy was discarded). */
  readonly fullRestoreReason?: string;
}

export interface OwnerRequest extends PartitionRef {
  readonly owner: Owner;
}

export interface FoldLoopRequest extends OwnerRequest {
  /**
   * Scheduled with the recovery of this name (Owner.foldAwaitsRecovery): wait, heartbeating and
   * cancellable, until it has installed the partition's engine in the process, then fold.
   */
  readonly afterRecovery?: string;
}

export interface PersistRequest extends OwnerRequest {
  /** Wait this long (heartbeating) before reporting the owner's persists (docs/design.md, "The persist cadence lives in the owning process"). */
  readonly delayMs: number;
  readonly reason: 'timer' | 'revoke' | 'shutdown';
}

export interface PersistResult {
  readonly persistedKeys: number;
  readonly deletedKeys: number;
  readonly committedOffset?: string;
  readonly liveKeys: number;
  /** The input partition's log end and the lag behind it, when known. */
  readonly logEndOffset?: string;
  readonly lag?: number;
  readonly ms: number;
  readonly at: number;
  /** Records dead-lettered by this persist (they landed with it). */
  readonly deadLetters?: number;
  /**
   * Records the fold emitted that landed with this persist — and with the owner's in-process
   * `outputEvery` persists since the last one it reported (they are not workflow activities).
   */
  readonly outputs?: number;
  /** Nothing was persisted: the partition was revoked on the owner (its revoke signal says what it flushed). */
  readonly skipped?: boolean;
}

export interface FlowActivities {
  recover(request: RecoverRequest): Promise<RecoverResult>;
  /** Long-running: processes the partition until cancelled; heartbeats progress. */
  foldLoop(request: FoldLoopRequest): Promise<void>;
  persist(request: PersistRequest): Promise<PersistResult>;
}

/** ApplicationFailure types the activities raise and the workflow tells apart. */
export const FailureTypes = {
  /**
   * A newer generation or producer epoch owns the partition: stop, do not retry. (The string
   * predates the rename to SnapshotWriteFencedError and stays: recorded histories carry it.)
   */
  fenced: 'SnapshotWriteFenced',
  /** The activity was scheduled for a generation this process no longer holds. */
  staleGeneration: 'StaleGeneration',
  /**
   * The partition stopped on its owner (a fold or decode failure, a persist that failed without
   * ignorePersistErrors, a producer epoch lost while still owning the partition): the workflow
   * retries it on the same owner after a backoff.
   */
  persistFailed: 'PersistFailed',
} as const;
