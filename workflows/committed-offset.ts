/**
 * The committed offset a partition's status shows after a persist reported `reported`: never
 * behind the one shown, when `mayKeep()` says the workflow may keep it (the patch check — see
 * MONOTONIC_COMMITTED_PATCH in partition-workflow.ts). A persist's result can reach the workflow
 * after a later one's: a timer persist's completion behind the revoke's flush, which landed after
 * it in the owner's serialized chain. Offsets are decimal strings; one that is not is taken as is.
 */
export function committedAfter(shown: string | undefined, reported: string | undefined, mayKeep: () => boolean): string | undefined {
  if (reported === undefined) return shown;
  if (shown !== undefined && DECIMAL.test(shown) && DECIMAL.test(reported) && BigInt(reported) < BigInt(shown) && mayKeep()) return shown;
  return reported;
}

const DECIMAL = /^\d+$/;
