import type { Clock } from './clock';
import type { KeyFlow } from './key-flow';

/**
 * A partition's outputs (emitted records and dead letters) not landed yet — held on their keys, or
 * in a write in flight — and since when the oldest of them waits: when an `outputs` persist is due
 * (`outputEvery`, or half of `maxPendingOutputs`) and when the fold must wait for one (the bound).
 */
export class PendingOutputs {
  /** Outputs emitted (or dead-lettered) and not landed yet. */
  held = 0;
  /** When the oldest pending output (of any key) was folded, if any is pending (clock ms). */
  private since: number | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly outputEvery: number,
    private readonly max: number | undefined,
  ) {}

  /** Outputs were added to a key. */
  added(n: number): void {
    this.held += n;
    this.since ??= this.clock.now();
  }

  /** Outputs landed with their key's write. */
  landed(n: number): void {
    this.held -= n;
  }

  /** An `outputs` persist is due: some output waited `outputEvery`, or half the bound is held. */
  due(now: number): boolean {
    const since = this.since;
    if (since === undefined) return false;
    const max = this.max;
    // At half the bound a persist starts while folding goes on: the fold waits at the bound only
    // when outputs come faster than persists land them, not once per bound's worth of outputs.
    return now >= since + this.outputEvery || (max !== undefined && this.held >= max / 2);
  }

  /** The bound is reached: fold nothing more until a persist made room. */
  full(): boolean {
    const max = this.max;
    return max !== undefined && this.held >= max;
  }

  /** After a persist's writes: outputs still pending (failed writes, records folded meanwhile) are due again from `now`. */
  afterWrites<S, V>(now: number, keys: Iterable<KeyFlow<S, V>>): void {
    if (this.since === undefined) return;
    this.since = undefined;
    for (const kf of keys) {
      const outputs = kf.x?.outputs;
      if (outputs !== undefined && outputs.length > 0) {
        this.since = now;
        return;
      }
    }
  }
}
