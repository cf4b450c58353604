import { Gauge, type Registry } from 'prom-client';
import type { PartitionFigures } from '../runtime/flow-runtime';

/** The partition states the `kafka_flow_partitions` gauge always reports (0 when none), so a panel never shows "no data". */
export const PARTITION_STATES = ['recovering', 'assigned', 'running', 'revoked', 'fenced', 'failed'] as const;

/**
 * Gauges of where this process's partitions stand, computed at each scrape from the runtime (no
 * cost between scrapes, none per record): `kafka_flow_lag_records` (log end of the last fetch −
 * position), `kafka_flow_commit_lag_records` (position − committed offset: what a restart would
 * fold again) and `kafka_flow_partitions` by state (`recovering` until its engine is installed).
 * `figures` answers undefined until the runtime exists; each gauge asks it (a walk over the slots).
 */
export function registerPartitionGauges(registry: Registry, flow: string, figures: () => readonly PartitionFigures[] | undefined): void {
  const labelNames = ['flow', 'topic', 'partition'] as const;
  new Gauge({
    name: 'kafka_flow_lag_records',
    help: "Records between a partition's position and the log end of its last fetch",
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const f of figures() ?? []) if (f.lag !== undefined) this.set({ flow, topic: f.topic, partition: String(f.partition) }, f.lag);
    },
  });
  new Gauge({
    name: 'kafka_flow_commit_lag_records',
    help: "Records a partition has folded past its committed offset (folded again after a restart)",
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const f of figures() ?? []) if (f.commitLag !== undefined) this.set({ flow, topic: f.topic, partition: String(f.partition) }, f.commitLag);
    },
  });
  new Gauge({
    name: 'kafka_flow_partitions',
    help: 'Partitions of the current generation in this process, by state',
    labelNames: ['flow', 'state'],
    registers: [registry],
    collect() {
      this.reset();
      const counts = new Map<string, number>(PARTITION_STATES.map((s) => [s, 0]));
      for (const f of figures() ?? []) counts.set(f.state, (counts.get(f.state) ?? 0) + 1);
      for (const [state, n] of counts) this.set({ flow, state }, n);
    },
  });
}
