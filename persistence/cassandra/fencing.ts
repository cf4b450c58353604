/**
 * The rule a fenced ('lwt') snapshot write follows, as a pure function of what the store answered.
 *
 * Every row carries the `offset` of its snapshot and the consumer `generation` of the owner that
 * wrote it. A write by generation G at offset O lands when the stored (generation, offset) is
 * older in this order: a higher generation always wins; within one generation, a higher offset
 * wins — and a put at the same offset over a value row of the same generation lands too (a key's
 * writes within a generation are made one after the other, and a key timer's fire changes the
 * state at the same offset; over a delete marker at its offset it is refused). Cassandra's IF
 * conditions cannot say "or", so a write is a short conversation:
 *
 *   1. the optimistic statement: INSERT … IF NOT EXISTS for a key not known to have a row, else
 *      UPDATE/DELETE … IF generation <= G AND offset < O (≤ O for a delete);
 *   2. if refused, Cassandra answers with the stored generation and offset, and `nextStep`
 *      decides: refuse, read the row (the answer did not say whether it holds a value), retry the
 *      optimistic statement (the row changed under us), or compare-and-set over exactly the stored
 *      version — an older generation wrote a higher offset (the stale owner got ahead before our
 *      first write, and we are newer), or a value row at our own offset (our own earlier write, or
 *      the state before a timer's fire: rewritten, the same content again being harmless).
 *
 * Only a refusal `by: 'generation'` means a newer owner exists (a fence). A refusal by offset
 * (this generation already wrote further: its own earlier write landed late, or two of its writes
 * raced) or by marker (a put met a delete marker at its own offset) says nothing of another owner:
 * the caller treats it as a failure, and the partition recovers from what landed.
 *
 * Without a generation (none was given) only offsets are compared.
 */

/** A row's version as stored. `generation` is null for rows written without one (kafka-flow, 'none'). */
export interface StoredVersion {
  readonly generation: number | null;
  /**
   * null: a row whose cells have all expired (a fence row's TTL over a row first INSERTed, whose
   * primary key outlives its cells). It holds nothing: it reads as no row and any write takes it over.
   */
  readonly offset: number | null;
  /** Whether the row is a delete marker (no value); undefined when the answer did not say. */
  readonly marker?: boolean;
}

export interface WriteAttempt {
  /** `delete` writes a delete marker (a row without a value); `purge` removes the row. */
  readonly kind: 'put' | 'delete' | 'purge';
  /** The writer's consumer generation; undefined compares offsets only. */
  readonly generation: number | undefined;
  readonly offset: number;
}

export type NextStep =
  /** The row already is what we meant to write (or, for a delete, there is no row). */
  | { readonly step: 'done' }
  /** `generation`: a newer owner wrote (a fence); `offset`, `marker`: this generation's own rows disagree (a failure). */
  | { readonly step: 'refuse'; readonly by: 'generation' | 'offset' | 'marker'; readonly reason: string }
  /** Read the row (linearizably) and decide again: whether it is a marker decides. */
  | { readonly step: 'read' }
  /** INSERT … IF NOT EXISTS (a put found no row). */
  | { readonly step: 'insert' }
  /** The optimistic conditional statement again (the row moved between our reads). */
  | { readonly step: 'conditional' }
  /** UPDATE/DELETE … IF generation = stored.generation AND offset = stored.offset. */
  | { readonly step: 'cas'; readonly expected: StoredVersion };

/** What to do after a refused statement; `stored` is undefined when the store has no row. */
export function nextStep(stored: StoredVersion | undefined, attempt: WriteAttempt): NextStep {
  if (stored === undefined) return attempt.kind === 'purge' ? { step: 'done' } : { step: 'insert' };
  // Nothing stored but an expired row's primary key: taken over exactly as it is.
  if (stored.offset === null) return { step: 'cas', expected: stored };
  const { offset } = attempt;
  if (attempt.generation !== undefined && stored.generation !== null && stored.generation !== attempt.generation) {
    if (stored.generation > attempt.generation) {
      return {
        step: 'refuse',
        by: 'generation',
        reason: `stored by generation ${stored.generation} (offset ${stored.offset}), newer than this writer's generation ${attempt.generation}`,
      };
    }
    return { step: 'cas', expected: stored };
  }
  if (attempt.generation !== undefined && stored.generation === null) return { step: 'cas', expected: stored };
  // Same generation, or offsets only.
  if (stored.offset === offset && attempt.kind === 'put') {
    // Our own identical write only if the row holds a value: a marker at the same offset cannot
    // also be this put.
    if (stored.marker === undefined) return { step: 'read' };
    if (!stored.marker) return { step: 'cas', expected: stored };
    return {
      step: 'refuse',
      by: 'marker',
      reason: `a delete marker is stored at this put's offset ${offset}` + (attempt.generation === undefined ? '' : ` (both generation ${attempt.generation})`),
    };
  }
  const older = attempt.kind === 'put' ? stored.offset < offset : stored.offset <= offset;
  if (older) return { step: 'conditional' };
  return {
    step: 'refuse',
    by: 'offset',
    reason: `stored offset ${stored.offset} is newer than this ${attempt.kind}'s offset ${offset}` +
      (attempt.generation === undefined ? '' : ` (both generation ${attempt.generation})`),
  };
}

/** How many statements one key's write may take before it is refused as contended. */
export const MAX_ROUNDS = 5;

/**
 * A journal's fenced purge (journal modes under 'lwt'): what to do after its conditional batch was
 * refused, from the journal's stored generation — `undefined` when the answer had none (no
 * journal, or one never given a generation: both satisfy `generation = null`). A newer
 * generation has appended to the journal: fenced. None: the batch again on `generation = null`.
 * Not newer: it changed under us; the batch again on `generation <= G`.
 */
export function journalPurgeStep(
  stored: number | null | undefined,
  generation: number,
): { readonly step: 'fenced'; readonly reason: string } | { readonly step: 'retry'; readonly expected: 'none' | 'not-newer' } {
  if (stored === null || stored === undefined) return { step: 'retry', expected: 'none' };
  if (stored > generation) {
    return { step: 'fenced', reason: `generation ${stored} has written the journal, newer than this writer's generation ${generation}` };
  }
  return { step: 'retry', expected: 'not-newer' };
}
