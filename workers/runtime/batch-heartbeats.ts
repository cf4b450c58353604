/**
 * Heartbeats for a consumer batch callback that waits. kafkajs heartbeats only between batches and
 * when a callback calls its `heartbeat()`; the fold of a batch can wait far longer than the
 * session timeout inside the callback — for the partition's fold-loop activity to take it on a
 * loaded worker, for an async fold, for an outputs persist once maxPendingOutputs are held (the
 * Cassandra backend's writes on a slow or restarting node). Without heartbeats the group drops
 * the member, the persist's offset commit fails (UNKNOWN_MEMBER_ID) and every partition of the
 * worker stops and is recovered again: in a chaos run at production load every commit of the
 * Cassandra mode was refused that way for minutes (docs/experiments/2026-12-07-cassandra-batch-heartbeats.md).
 *
 * `heartbeatDuring(heartbeat, o, work)` sends the callback's heartbeat every `o.everyMs` until
 * `work` settles. A heartbeat that fails (the group rebalancing under eager rebalancing, the member
 * unknown) ends the heartbeats; once `work` has settled its error is thrown, as the callback's own
 * heartbeat after the batch would have thrown it, so kafkajs rejoins the group as usual. An error
 * of `work` wins.
 *
 * Past `o.maxMs` the heartbeats stop (`onGiveUp` is told once): a callback stuck for good then
 * loses the member as before, and the group gives its partitions to the others — the Java consumer's
 * `max.poll.interval.ms`, whose background heartbeats stop the same way.
 */
export interface BatchHeartbeats {
  readonly everyMs: number;
  readonly maxMs: number;
  readonly onGiveUp?: (waitedMs: number) => void;
}

export async function heartbeatDuring<T>(heartbeat: () => Promise<void>, o: BatchHeartbeats, work: Promise<T>): Promise<T> {
  let failure: { error: unknown } | undefined;
  let sending = false;
  const started = Date.now();
  const timer = setInterval(() => {
    if (sending || failure) return;
    const waited = Date.now() - started;
    if (waited > o.maxMs) {
      clearInterval(timer);
      o.onGiveUp?.(waited);
      return;
    }
    sending = true;
    heartbeat().then(
      () => {
        sending = false;
      },
      (error: unknown) => {
        sending = false;
        failure = { error };
        clearInterval(timer);
      },
    );
  }, o.everyMs);
  try {
    const result = await work;
    if (failure) throw failure.error;
    return result;
  } finally {
    clearInterval(timer);
  }
}
