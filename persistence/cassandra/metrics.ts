import { Counter, Histogram, type Registry } from 'prom-client';

type Labels = 'flow' | 'topic' | 'partition';

/**
 * The Cassandra backend's Prometheus metrics (on the process's registry, created once per
 * registry), next to the engine's. Labels: flow, input topic, partition — never a key.
 */
export class CassandraPersistenceMetrics {
  /** Snapshot puts and deletes by outcome: applied, refused (the fence), failed (a statement failed). */
  readonly snapshotWrites: Counter<Labels | 'outcome'>;
  /** Writes the fence refused, by what was newer: generation, offset, or contended (gave up after MAX_ROUNDS). */
  readonly fenceRefusals: Counter<Labels | 'by'>;
  /** Statements sent for snapshot writes: with 'lwt', one per write normally, more on take-overs. */
  readonly writeStatements: Counter<Labels>;
  readonly recoveryDuration: Histogram<Labels>;
  readonly recoveredKeys: Counter<Labels>;

  private static readonly byRegistry = new WeakMap<Registry, CassandraPersistenceMetrics>();

  static of(registry: Registry): CassandraPersistenceMetrics {
    let m = CassandraPersistenceMetrics.byRegistry.get(registry);
    if (!m) {
      m = new CassandraPersistenceMetrics(registry);
      CassandraPersistenceMetrics.byRegistry.set(registry, m);
    }
    return m;
  }

  private constructor(registry: Registry) {
    const registers = [registry];
    const labelNames: Labels[] = ['flow', 'topic', 'partition'];
    this.snapshotWrites = new Counter({
      name: 'kafka_flow_cassandra_snapshot_writes_total',
      help: 'Cassandra snapshot puts and deletes, by outcome (applied, refused, failed)',
      labelNames: [...labelNames, 'outcome'],
      registers,
    });
    this.fenceRefusals = new Counter({
      name: 'kafka_flow_cassandra_fence_refusals_total',
      help: "Snapshot writes the 'lwt' fence refused, by what the stored row had newer (generation, offset, contended)",
      labelNames: [...labelNames, 'by'],
      registers,
    });
    this.writeStatements = new Counter({
      name: 'kafka_flow_cassandra_write_statements_total',
      help: 'Statements sent for Cassandra snapshot writes',
      labelNames,
      registers,
    });
    this.recoveryDuration = new Histogram({
      name: 'kafka_flow_cassandra_recovery_duration_seconds',
      help: 'Duration of a partition recovery from Cassandra: key listing and snapshot (or journal) reads',
      labelNames,
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180],
      registers,
    });
    this.recoveredKeys = new Counter({
      name: 'kafka_flow_cassandra_recovered_keys_total',
      help: 'Keys recovered from Cassandra',
      labelNames,
      registers,
    });
  }
}
