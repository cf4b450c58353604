/**
 * Bounded concurrency: at most `limit` tasks run at once (`max` unless a subclass lowers it), the
 * rest wait in arrival order. A slot freed when a task ends goes straight to the next waiter, so the
 * bound holds under any interleaving.
 */
export class Limiter {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  protected bound: number;

  constructor(readonly max: number) {
    if (!(Number.isInteger(max) && max >= 1)) throw new RangeError(`a limiter needs at least one slot; got ${max}`);
    this.bound = max;
  }

  /** The bound now (1..max). */
  get limit(): number {
    return this.bound;
  }

  /** Tasks running now. */
  get running(): number {
    return this.active;
  }

  /** Tasks waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.active < this.bound) this.active++;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await task();
    } finally {
      this.active--;
      this.admit();
    }
  }

  /** Waiters into the slots free under the bound (after a task ends, or the bound rose). */
  protected admit(): void {
    while (this.active < this.bound && this.waiting.length > 0) {
      this.active++;
      this.waiting.shift()!();
    }
  }
}

/**
 * A limiter whose bound follows what the server can take (additive increase, multiplicative
 * decrease, as TCP's congestion window): it starts at `max`; a sign of overload (a request the
 * node did not answer in time, or refused as overloaded) halves it, at most once per
 * `decreaseEveryMs` (the requests in flight at one overload all time out together: one halving),
 * down to 1; `limit` successes in a row raise it by one, back up to `max`. Timed-out requests
 * are not cancelled on the server, so sending fewer at once is what lets its queue drain.
 */
export class AdaptiveLimiter extends Limiter {
  private successes = 0;
  private lastDecrease = Number.NEGATIVE_INFINITY;

  constructor(
    max: number,
    private readonly decreaseEveryMs = 250,
    private readonly now: () => number = () => performance.now(),
  ) {
    super(max);
  }

  /** A request showed the server overloaded: halve the bound (once per `decreaseEveryMs`). */
  overloaded(): void {
    const t = this.now();
    if (t - this.lastDecrease < this.decreaseEveryMs) return;
    this.lastDecrease = t;
    this.bound = Math.max(1, Math.floor(this.bound / 2));
    this.successes = 0;
  }

  /** A request succeeded: after `limit` of them in a row, one more may run at once. */
  succeeded(): void {
    if (this.bound >= this.max) return;
    if (++this.successes < this.bound) return;
    this.successes = 0;
    this.bound++;
    this.admit();
  }
}

/**
 * One task at a time per lane, lanes independent: a task waits for the lane's previous task to
 * settle (whatever its outcome). An idle lane holds nothing.
 */
export class Lanes {
  private readonly tails = new Map<string, Promise<unknown>>();

  /** Lanes with a task running or waiting. */
  get busy(): number {
    return this.tails.size;
  }

  run<T>(lane: string, task: () => Promise<T>): Promise<T> {
    const before = this.tails.get(lane);
    const result = before === undefined ? task() : before.then(task, task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(lane, tail);
    void tail.then(() => {
      if (this.tails.get(lane) === tail) this.tails.delete(lane);
    });
    return result;
  }
}

/**
 * Maps `source` through `fn` with at most `concurrency` calls in flight, yielding results as they
 * complete (not in source order). The first failure is thrown once the calls in flight settle
 * (so none is left running unobserved); the source is then closed. Completions go through a
 * queue (not Promise.race over everything in flight, which re-subscribes to every pending call
 * on each turn: quadratic).
 */
export async function* mapConcurrent<T, R>(
  source: AsyncIterable<T> | Iterable<T>,
  concurrency: number,
  fn: (item: T) => Promise<R>,
): AsyncGenerator<R> {
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new RangeError(`concurrency must be ≥ 1; got ${concurrency}`);
  const it =
    Symbol.asyncIterator in source
      ? (source as AsyncIterable<T>)[Symbol.asyncIterator]()
      : toAsync((source as Iterable<T>)[Symbol.iterator]());
  type Settled = { ok: true; value: R } | { ok: false; error: unknown };
  const completed: Settled[] = [];
  let wake: (() => void) | undefined;
  const settle = (s: Settled) => {
    completed.push(s);
    const w = wake;
    wake = undefined;
    w?.();
  };
  let inFlight = 0;
  let exhausted = false;
  let failure: { error: unknown } | undefined;
  try {
    for (;;) {
      while (!exhausted && !failure && inFlight < concurrency) {
        const n = await it.next();
        if (n.done) {
          exhausted = true;
          break;
        }
        inFlight++;
        let call: Promise<R>;
        try {
          call = fn(n.value);
        } catch (error) {
          call = Promise.reject(error);
        }
        call.then(
          (value) => settle({ ok: true, value }),
          (error: unknown) => settle({ ok: false, error }),
        );
      }
      if (inFlight === 0) break;
      if (completed.length === 0) await new Promise<void>((resolve) => (wake = resolve));
      const settled = completed.shift()!;
      inFlight--;
      if (!settled.ok) {
        failure ??= { error: settled.error };
        continue;
      }
      if (!failure) yield settled.value;
    }
    if (failure) throw failure.error;
  } finally {
    if (!exhausted) await it.return?.();
  }
}

function toAsync<T>(it: Iterator<T>): AsyncIterator<T> {
  return { next: async () => it.next(), return: async () => it.return?.() ?? { done: true, value: undefined } };
}

/** `source` in arrays of at most `size` items, in order (the last one may be shorter). */
export async function* chunked<T>(source: AsyncIterable<T>, size: number): AsyncGenerator<T[]> {
  if (!(Number.isInteger(size) && size >= 1)) throw new RangeError(`chunk size must be ≥ 1; got ${size}`);
  let chunk: T[] = [];
  for await (const item of source) {
    chunk.push(item);
    if (chunk.length >= size) {
      yield chunk;
      chunk = [];
    }
  }
  if (chunk.length > 0) yield chunk;
}

/**
 * Items of several async sources, at most `concurrency` sources read at once, yielded as they
 * arrive (not in source order). A source's next item is asked for only once its previous one was
 * taken, so a slow consumer holds every source back (at most one item read ahead per source). The
 * first failure is thrown; every source still open is then closed.
 */
export async function* mergeConcurrent<T>(sources: Iterable<AsyncIterable<T>>, concurrency: number): AsyncGenerator<T> {
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new RangeError(`concurrency must be ≥ 1; got ${concurrency}`);
  type Active = { it: AsyncIterator<T>; next: Promise<{ active: Active; result: IteratorResult<T> }> };
  const pending = sources[Symbol.iterator]();
  const active = new Set<Active>();
  const advance = (a: Active) => {
    a.next = a.it.next().then((result) => ({ active: a, result }));
  };
  try {
    for (;;) {
      while (active.size < concurrency) {
        const n = pending.next();
        if (n.done) break;
        const a = { it: n.value[Symbol.asyncIterator]() } as Active;
        advance(a);
        active.add(a);
      }
      if (active.size === 0) return;
      const { active: a, result } = await Promise.race([...active].map((x) => x.next));
      if (result.done) {
        active.delete(a);
        continue;
      }
      yield result.value;
      advance(a);
    }
  } finally {
    // Close the sources still open (a failure, or the consumer stopped early); their errors are not ours to throw.
    await Promise.allSettled([...active].map(async (a) => {
      await a.next.catch(() => undefined);
      await a.it.return?.();
    }));
  }
}
