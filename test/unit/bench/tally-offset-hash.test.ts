import { tallyOffsetHash } from '../../../bench/lib/flow-workers';
import { type HashState, step } from '../../fixtures/offset-hash-flow';

// The exactness tally of the offset-hash benchmarks (ours against the persisted state, Kafka
// Streams against its changelog): per key, lost and duplicated records and mismatched keys.
const fold = (offsets: string[]): HashState => offsets.reduce<HashState | undefined>((s, o) => step(s, o), undefined)!;

test('an exact copy tallies nothing; a missing, a repeated and an unknown key each show', () => {
  const reference = new Map([
    ['a', fold(['0', '2'])],
    ['b', fold(['1'])],
  ]);
  expect(tallyOffsetHash(reference, new Map(reference), 3)).toEqual({ records_in_topic: 3, keys: 2, records_lost: 0, records_duplicated: 0, keys_mismatched: 0 });
  const found = new Map([
    ['a', fold(['0'])], // one record short
    ['b', fold(['1', '1'])], // one applied twice
    ['c', fold(['5'])], // never in the input
  ]);
  expect(tallyOffsetHash(reference, found, 3)).toEqual({ records_in_topic: 3, keys: 2, records_lost: 1, records_duplicated: 2, keys_mismatched: 3 });
});
