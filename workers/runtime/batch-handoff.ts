/**
 * Hands the fetched batches of one partition from the group consumer's callback to the partition's
 * fold-loop activity, which folds each and acks it. The consumer's callback waits for the ack, so
 * kafkajs's ordering (one batch of a partition at a time), its back-pressure and its revoke point
 * (after the batches in flight) stay what they are; the fold runs in the activity that owns the
 * partition here, and ends when that activity ends.
 */
export class BatchHandoff<B> {
  private held: Held<B> | undefined;
  private wake: (() => void) | undefined;
  private closed = false;

  /**
   * Consumer side: hands `batch` over and waits until the fold loop has folded it (true), or the
   * loop ended without taking it (false: nothing of it was folded). Rejects with the fold's own
   * error when folding threw (a rebalance met by the consumer's heartbeat, say), as the callback
   * would have.
   */
  hand(batch: B): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.held) return Promise.reject(new Error('a batch of this partition is already handed over (kafkajs hands one at a time)'));
    return new Promise<boolean>((resolve, reject) => {
      this.held = { batch, done: resolve, fail: reject };
      this.wake?.();
    });
  }

  /**
   * Fold-loop side: the batch handed over, waiting for one up to `waitMs` (less if `signal`
   * aborts). Undefined when none came, or when `mine()` says the caller no longer drives the
   * partition (a newer fold loop took over): the batch stays for that one.
   */
  async take(waitMs: number, mine: () => boolean, signal?: AbortSignal): Promise<Held<B> | undefined> {
    if (!this.held && !this.closed && !signal?.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', done);
          if (this.wake === done) this.wake = undefined;
          resolve();
        };
        const timer = setTimeout(done, waitMs);
        signal?.addEventListener('abort', done, { once: true });
        this.wake = done;
      });
    }
    if (!mine()) return undefined;
    const held = this.held;
    this.held = undefined;
    return held;
  }

  /** The fold loop ended: a batch handed over and not taken goes back unfolded; later ones are refused. */
  close(): void {
    this.closed = true;
    const held = this.held;
    this.held = undefined;
    held?.done(false);
    this.wake?.();
  }
}

/** A batch handed over, with how its fold ends for the consumer's callback. */
export interface Held<B> {
  readonly batch: B;
  /** Folded (true), or given back unfolded (false). */
  done(folded: boolean): void;
  /** Folding threw: the consumer's callback rethrows it. */
  fail(err: unknown): void;
}
