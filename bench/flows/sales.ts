// The sales example (examples/sales/flow.ts: running totals per store, transactional Kafka
// persistence) as bench:orchestration runs it: the example's own definition, its names and
// persistEvery from SALES_TOPIC, SALES_FLOW, SALES_GROUP and SALES_PERSIST_EVERY, with the fold
// wrapped to print the same markers as bench/flows/totals.ts when BENCH_RECORDS is set
// (`BENCH FIRST_FOLD` at the first record, `BENCH ALL_FOLDED` at the BENCH_RECORDS-th).
import example from '../../examples/sales/flow';

const expected = process.env.BENCH_RECORDS ? Number(process.env.BENCH_RECORDS) : undefined;
let folded = 0;

export default Object.freeze({
  ...example,
  fold: expected === undefined
    ? example.fold
    : (state: Parameters<typeof example.fold>[0], record: Parameters<typeof example.fold>[1], ctx: Parameters<typeof example.fold>[2]) => {
        folded++;
        if (folded === 1) process.stdout.write('BENCH FIRST_FOLD\n');
        if (folded === expected) process.stdout.write('BENCH ALL_FOLDED\n');
        return example.fold(state, record, ctx);
      },
});
