// The offset-hash fixture flow (test/fixtures/offset-hash-flow.ts: per key a count and a running
// hash over the folded offsets; its names from TEST_FLOW_* as there) with the fold wrapped to note
// when each partition folds, for bench:rebalance: when BENCH_FOLD_LOG names a file, the fold
// appends `<epoch ms> <partition> <offset>` to it — synchronously, so a kill -9 loses nothing
// written — at the first record of a partition after 10 ms without one noted, so a stretch
// without folding shows as a gap between two lines to within 10 ms.
import { appendFileSync } from 'node:fs';
import flow from '../../test/fixtures/offset-hash-flow';

const file = process.env.BENCH_FOLD_LOG;
const notedAt: number[] = [];

type Fold = typeof flow.fold;

export default Object.freeze({
  ...flow,
  fold: file === undefined
    ? flow.fold
    : (state: Parameters<Fold>[0], record: Parameters<Fold>[1], ctx: Parameters<Fold>[2]) => {
        const now = Date.now();
        if (now - (notedAt[record.partition] ?? 0) >= 10) {
          notedAt[record.partition] = now;
          appendFileSync(file, `${now} ${record.partition} ${record.offset}\n`);
        }
        return flow.fold(state, record, ctx);
      },
});
