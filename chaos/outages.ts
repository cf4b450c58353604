// What was out of the system's hands during a chaos run: a server down or cut off (a broker
// killed until it is ready again, Temporal or Cassandra stopped until started, a proxy dropping or
// stalling every connection), and a mode's worker killed or frozen until its session timeout has
// passed (before that the group cannot know the owner is gone: Kafka's protocol floor). A
// partition cannot progress then, so the stall figure leaves that time out (a second figure keeps
// it in).

/** A server, or `owner:<mode>`: a worker of that mode killed or frozen, its session not yet expired. */
export type Server = 'kafka' | 'temporal' | 'cassandra' | `owner:${string}`;

interface Span {
  server: Server;
  from: number;
  to?: number;
}

export class Outages {
  private readonly spans: Span[] = [];

  /** Marks `server` out from `at`; call the returned function when it is back. */
  begin(server: Server, at = Date.now()): (at?: number) => void {
    const span: Span = { server, from: at };
    this.spans.push(span);
    return (end = Date.now()) => {
      span.to ??= end;
    };
  }

  /** Milliseconds within [from, to] when any of `servers` was out (overlapping outages counted once). */
  downMs(servers: readonly Server[], from: number, to: number): number {
    const spans = this.spans
      .filter((s) => servers.includes(s.server))
      .map((s) => [Math.max(from, s.from), Math.min(to, s.to ?? to)] as const)
      .filter(([a, b]) => b > a)
      .sort((x, y) => x[0] - y[0]);
    let total = 0;
    let end = Number.NEGATIVE_INFINITY;
    for (const [a, b] of spans) {
      if (b <= end) continue;
      total += b - Math.max(a, end);
      end = b;
    }
    return total;
  }

  /** Every outage so far, ended or not, relative to `t0` in seconds (for the report). */
  list(t0: number): Array<{ server: Server; fromS: number; toS?: number }> {
    return this.spans.map((s) => ({ server: s.server, fromS: (s.from - t0) / 1000, toS: s.to === undefined ? undefined : (s.to - t0) / 1000 }));
  }
}

/**
 * A fault's recovery from its heal (`healedAt`) to its partitions' progress (`now`), in seconds:
 * `recoveryS` leaves out the time within it when a server the affected modes need was out or an
 * owner's session had not yet expired — a later fault's outage, like the stall figure does —
 * and `wallS` counts everything. With a fault every few seconds, a fault's recovery otherwise
 * absorbs the outages of the faults after it (the committed run of seed 29001: the kafka mode's
 * recovery p99 147.6 s wall, 71.5 s with them left out).
 */
export function recoveryFigures(outages: Outages, servers: readonly Server[], healedAt: number, now: number): { recoveryS: number; wallS: number } {
  const wallMs = Math.max(0, now - healedAt);
  const heldMs = outages.downMs(servers, healedAt, now);
  return { recoveryS: Number(((wallMs - heldMs) / 1000).toFixed(1)), wallS: Number((wallMs / 1000).toFixed(1)) };
}
