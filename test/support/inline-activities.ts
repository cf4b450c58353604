import type { FoldingHandle } from '../../activities/partition-host';
import type { Owner } from '../../activities/types';
import { type Logger, type LogFn, silentLogger } from '../../core/logger';
import type { FlowRuntime } from '../../workers/runtime/flow-runtime';
import type { PartitionSignals } from '../../workers/runtime/partition-signals';
import { driveFolding } from './fold-loop';

/**
 * The partition workflow's part played in-process, for tests of a flow runtime on the real broker:
 * each assignment is recovered and folded at once, as the workflow's activities would.
 */
export class ActivitiesInline implements PartitionSignals {
  runtime: FlowRuntime | undefined;
  folding: FoldingHandle | undefined;
  assignments = 0;
  /** The last failure a poll of the fold loop reported. */
  failure: unknown;

  async assigned(input: { flow: string; topic: string; partition: number }, owner: Owner): Promise<void> {
    this.assignments += 1;
    // A real signal goes through Temporal: the recovery the join started (recoverAtJoin) is there
    // by the time the activity comes, and the activity takes it over rather than fencing it.
    await new Promise((resolve) => setImmediate(resolve));
    const request = { flow: input.flow, topic: input.topic, partition: input.partition, owner };
    await this.runtime!.recover(request);
    this.folding = driveFolding(this.runtime!.startFolding(request));
  }

  async revoked(): Promise<void> {}

  /** The fold loop's state now (failure kept in `failure`). */
  poll() {
    const p = this.folding?.poll();
    if (p?.failure !== undefined) this.failure = p.failure;
    return p;
  }
}

/** A line logged at warn level or above, with its fields. */
export type CapturedLine = { level: string; fields: Record<string, unknown>; message?: string };

/** A logger that keeps the lines logged at warn level and above in `lines`. */
export function capturingLogger(lines: CapturedLine[]): Logger {
  const at =
    (level: string): LogFn =>
    (fields, message) =>
      void lines.push({ level, fields: fields as Record<string, unknown>, message });
  return { ...silentLogger, warn: at('warn'), error: at('error') };
}
