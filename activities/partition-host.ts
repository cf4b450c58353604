import { KafkaFlowError } from '../config/errors';
import type { FoldLoopRequest, OwnerRequest, PersistResult, RecoverRequest, RecoverResult } from './types';

/** Why an activity refuses to act: the generation it was scheduled for is not this process's. */
export class StaleGenerationError extends KafkaFlowError {
  constructor(message: string) {
    super('STALE_GENERATION', message);
  }
}

/** A fold loop's hold on its partition: the fold-loop activity folds through it, polling it until it should end. */
export interface FoldingHandle {
  readonly token: number;
  /**
   * `settling`: revoked here (or the process is stopping and its revoke is coming), its revoke
   * signal not yet delivered — the loop should not end before it is.
   */
  poll(): { running: boolean; settling?: boolean; failure?: unknown; progress: Record<string, unknown> };
  /**
   * Folds the next batch the consumer hands to this loop, waiting up to `waitMs` for one (less if
   * `signal` aborts): true when it folded one. The consumer waits for each batch's fold, so the
   * loop is what folds the partition; when it ends, batches go back to the consumer unfolded.
   */
  foldNext(waitMs: number, signal?: AbortSignal): Promise<boolean>;
}

/**
 * What the activities need from the process that holds a flow's partitions (the worker's
 * FlowRuntime; a scripted one in tests). Each method checks that the request's generation is the
 * process's own and throws StaleGenerationError when it is not.
 */
export interface PartitionHost {
  /** Runs one activity's work, counted so that a graceful stop can let it end. */
  activity<T>(fn: () => Promise<T>): Promise<T>;
  recover(r: RecoverRequest): Promise<RecoverResult>;
  /**
   * A fold loop scheduled with its recovery (`r.afterRecovery`): `done` once that recovery has
   * installed the partition's engine here and no recovery started since; `ended` if it never will
   * (the process is stopping and the workflow has been told); else `waiting`.
   */
  recoveryDone?(r: FoldLoopRequest): 'done' | 'waiting' | 'ended';
  startFolding(r: OwnerRequest): FoldingHandle;
  /** A fold loop ended (cancelled): stop fetching the partition, unless another loop took it over. */
  stopFolding(r: OwnerRequest, token: number): void;
  /**
   * When the partition's last periodic persist started in this process (epoch ms), if it did under
   * the request's generation (timed in the process): the next one is due `delayMs` after that, not after its activity
   * started (the workflow's round trip between two persists is not added to every cycle).
   */
  lastPersistAt?(r: OwnerRequest): number | undefined;
  /** `persist` now, `skip` (revoked here, the workflow told), or `wait` (revoked, not yet signalled). */
  persistReadiness(r: OwnerRequest): 'persist' | 'skip' | 'wait';
  /** What the owner's persists landed since the last report (after the periodic one in flight or about to start); throws if the partition stopped here. */
  persist(r: OwnerRequest): Promise<PersistResult>;
}
