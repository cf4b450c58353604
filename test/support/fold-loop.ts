import type { FoldingHandle } from '../../activities/partition-host';

/**
 * Folds what the consumer hands `folding` until it should end, as the fold-loop activity does
 * (activities/flow-activities.ts, whose own tests cover the activity around it): for tests that
 * play the partition workflow's part themselves.
 */
export function driveFolding(folding: FoldingHandle): FoldingHandle {
  void (async () => {
    for (;;) {
      const p = folding.poll();
      if (p.failure !== undefined || (!p.running && !p.settling)) return;
      await folding.foldNext(5);
    }
  })();
  return folding;
}
