import { KafkaFlowError } from '../../config/errors';

/**
 * The partition's input offset is past its log end: the topic was recreated under the group, or
 * its log was truncated (an unclean leader election). Nothing tells where the flow should go on,
 * so it does not guess: the partition stops here (its workflow retries after a backoff, and stops
 * here again) and the group's committed offset stays as it was.
 */
export class InputOffsetOutOfRangeError extends KafkaFlowError {
  constructor(
    readonly topic: string,
    readonly partition: number,
    /** Where the partition was to go on (its committed offset, or how far it had folded). */
    readonly offset: number,
    readonly logStart: number,
    readonly logEnd: number,
  ) {
    super(
      'INPUT_OFFSET_OUT_OF_RANGE',
      `${topic}-${partition}: input offset ${offset} is past the partition's log end ${logEnd} (log start ${logStart}): ` +
        'the topic was recreated or its log truncated. The flow does not guess where to go on: with its workers stopped, ' +
        "reset the group's offset of this partition (kafka-consumer-groups.sh --reset-offsets)",
    );
  }
}

/**
 * What to do when a fetch at `offset` was out of the partition's range [logStart, logEnd]:
 * - `skip-deleted`: the topic's retention deleted records before the flow folded them (offset below
 *   the log start); they are gone, and folding goes on from the log start — `deleted` counts them;
 * - `stop`: the offset is past the log end (InputOffsetOutOfRangeError);
 * - `fetch-again`: the offset is in range now (the log moved since the fetch).
 */
export type OutOfRangeAction = { action: 'skip-deleted'; resumeAt: number; deleted: number } | { action: 'stop' } | { action: 'fetch-again' };

export function outOfRangeAction(offset: number, logStart: number, logEnd: number): OutOfRangeAction {
  if (offset < logStart) return { action: 'skip-deleted', resumeAt: logStart, deleted: logStart - offset };
  if (offset > logEnd) return { action: 'stop' };
  return { action: 'fetch-again' };
}
