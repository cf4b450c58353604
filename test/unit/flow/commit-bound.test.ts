import { CommitBound } from '../../../flow/commit-bound';

const INF = Number.POSITIVE_INFINITY;

describe('CommitBound (the offset a persist may commit with each chunk of writes)', () => {
  test('below the keys left alone, the later chunks not landed yet, and the position of a put', () => {
    // Planned writes hold 5, 9 and 3 today; another key, not written this time, holds 20.
    const bound = new CommitBound([5, 9, 3], 20, 30);
    // Chunk [0, 1): write 2 still holds 3 (not landed yet).
    expect(bound.forChunk(1, 30, 0)).toBe(3);
    bound.stillHolds(undefined); // landed, holds nothing more than capturedNext (below)
    // Chunk [1, 3): the remaining writes; a put there holds the captured position 30, the other key 20.
    expect(bound.forChunk(3, 30, 3)).toBe(20);
  });

  test('a written key that still holds (its write failed) keeps the bound below it', () => {
    const bound = new CommitBound([5, 9], INF, 30);
    expect(bound.forChunk(1, 30, 0)).toBe(9);
    bound.stillHolds(5); // the first write failed: the key still holds 5
    expect(bound.forChunk(2, 30, 0)).toBe(5);
  });

  test('nothing holding: the captured position; never a commit that does not move forward', () => {
    const bound = new CommitBound([7], INF, 12);
    expect(bound.forChunk(1, INF, 0)).toBe(12); // a delete or purge holds nothing afterwards
    expect(bound.forChunk(1, INF, 12)).toBeUndefined();
    expect(new CommitBound([], 4, 12).forChunk(0, INF, 4)).toBeUndefined();
  });

  test('a put of a key still folding holds its first record not yet folded, below the captured position', () => {
    const bound = new CommitBound([5], INF, 30);
    expect(bound.forChunk(1, 17, 0)).toBe(17);
  });
});
