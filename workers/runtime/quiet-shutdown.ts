/**
 * Stopping a Temporal workflow worker between two workflow tasks. The SDK (1.24) loses a workflow
 * task that reaches the worker within about 100 ms of its `shutdown()`: the task stays started on
 * the server until its start-to-close timeout (10 s) runs out, and only then goes to another
 * worker — a partition workflow handing its partition over waited those 10 s (bench:rebalance's
 * 10–12 s single-partition pauses). A graceful stop therefore waits, bounded, until the worker has
 * run no workflow activation for `quietMs`, and shuts it down then. That narrows the window, it
 * does not close it (scripts/shutdown-task-loss.ts measures both): the worker also stops its
 * workflow worker before it leaves the group, so that the signals the rebalance brings do not
 * reach it while it stops (workers/worker.ts).
 */

/** What the wait reads of the worker: its workflow activations in flight (Worker.getStatus()). */
export interface ActivationProbe {
  getStatus(): { numInFlightWorkflowActivations: number };
}

export interface QuietOptions {
  /** How long without a workflow activation counts as quiet. */
  quietMs: number;
  /** Shut down after this long whatever the traffic. */
  timeoutMs: number;
  /** How often the probe is read. */
  pollMs?: number;
}

export const QUIET_SHUTDOWN: QuietOptions = { quietMs: 150, timeoutMs: 2_000, pollMs: 5 };

/**
 * Resolves once `worker` has had no workflow activation in flight for `quietMs` (true), or at
 * `timeoutMs` (false). An activation that starts and ends between two reads is not seen: the
 * reads are a few ms apart, shorter than any workflow task.
 */
export async function untilWorkflowWorkerQuiet(worker: ActivationProbe, o: QuietOptions = QUIET_SHUTDOWN): Promise<boolean> {
  const started = Date.now();
  let quietSince = started;
  for (;;) {
    const now = Date.now();
    if (worker.getStatus().numInFlightWorkflowActivations > 0) quietSince = now;
    else if (now - quietSince >= o.quietMs) return true;
    if (now - started >= o.timeoutMs) return false;
    await new Promise((resolve) => setTimeout(resolve, o.pollMs ?? 5));
  }
}
