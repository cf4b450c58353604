/**
 * Offset safety of one persist: which offset may be committed together with each chunk of key
 * writes. A committed offset is where a replay starts, so it must stay at or below every offset a
 * key still holds (its first record not yet persisted) once the chunk has landed:
 * - the keys this persist does not write (`othersMin`);
 * - the written keys that still hold after their chunk (a write failed, or records came meanwhile);
 * - the planned writes of later chunks, which have not landed yet (their old holds);
 * - and, for the chunk itself, what its puts hold once landed: the position captured when the
 *   persist began, or, for a key still folding (an async fold), its first record not yet folded.
 * Infinity stands for "holds nothing".
 */
export class CommitBound {
  /** suffix[i]: the smallest old hold among planned writes i, i+1, … */
  private readonly suffix: number[];
  private doneMin = Number.POSITIVE_INFINITY;

  constructor(
    oldHolds: readonly number[],
    private readonly othersMin: number,
    private readonly capturedNext: number,
  ) {
    this.suffix = new Array<number>(oldHolds.length + 1);
    this.suffix[oldHolds.length] = Number.POSITIVE_INFINITY;
    for (let i = oldHolds.length - 1; i >= 0; i--) this.suffix[i] = Math.min(this.suffix[i + 1]!, oldHolds[i]!);
  }

  /**
   * The offset to commit with the chunk of writes that ends before write `end`, if they land —
   * undefined when it would not move past `committed`. `putsHold`: the smallest offset the chunk's
   * puts hold once landed (`capturedNext` for a key that is not folding; Infinity: no put).
   */
  forChunk(end: number, putsHold: number, committed: number): number | undefined {
    const candidate = Math.min(this.othersMin, this.doneMin, putsHold, this.suffix[end]!);
    const safe = candidate === Number.POSITIVE_INFINITY ? this.capturedNext : candidate;
    return safe > committed ? safe : undefined;
  }

  /** A written key's hold after its chunk (undefined: it holds nothing). */
  stillHolds(hold: number | undefined): void {
    if (hold !== undefined && hold < this.doneMin) this.doneMin = hold;
  }
}
