/**
 * A partition's pending key timers of one clock, earliest first: a binary min-heap of (time, key,
 * name), ties in key then name order so that timers due together fire in the same order on every
 * owner. Entries are not removed when a timer is cancelled or moved: the partition checks each
 * entry it pops against the key's timers (a moved timer is pushed again at its new time), so a key
 * has about one entry per pending timer however often its timers change.
 */
export interface TimerEntry {
  readonly at: number;
  readonly key: string;
  readonly name: string;
}

const before = (a: TimerEntry, b: TimerEntry): boolean =>
  a.at !== b.at ? a.at < b.at : a.key !== b.key ? a.key < b.key : a.name < b.name;

export class TimerQueue {
  private readonly heap: TimerEntry[] = [];

  get size(): number {
    return this.heap.length;
  }

  push(entry: TimerEntry): void {
    const h = this.heap;
    h.push(entry);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  /** The earliest entry, left in place. */
  peek(): TimerEntry | undefined {
    return this.heap[0];
  }

  pop(): TimerEntry | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (h.length === 0 || last === undefined) return top;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && before(h[l]!, h[m]!)) m = l;
      if (r < h.length && before(h[r]!, h[m]!)) m = r;
      if (m === i) break;
      [h[i], h[m]] = [h[m]!, h[i]!];
      i = m;
    }
    return top;
  }

  /** Keeps only the entries `keep` says (the others' keys left memory), in heap order again. */
  retain(keep: (entry: TimerEntry) => boolean): void {
    const kept = this.heap.filter(keep);
    this.heap.length = 0;
    for (const e of kept) this.push(e);
  }

  clear(): void {
    this.heap.length = 0;
  }
}
