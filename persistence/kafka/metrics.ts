import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

type Labels = 'flow' | 'topic' | 'partition';

/**
 * The Kafka snapshot backend's Prometheus metrics (on the process's registry, created once per
 * registry). Labels: flow, input topic, partition — never a key.
 */
export class KafkaPersistenceMetrics {
  /** Transactions (or, caching mode, sends) by outcome: committed, fenced, timeout, failed. */
  readonly transactions: Counter<Labels | 'outcome'>;
  readonly transactionDuration: Histogram<Labels>;
  /** Snapshot records written (puts and tombstones) that landed. */
  readonly records: Counter<Labels | 'kind'>;
  /** Fences, by reason (generation, member, producer-epoch, not-assigned). */
  readonly fences: Counter<Labels | 'reason'>;
  /** Commits that got no answer in time, by the outcome learned afterwards. */
  readonly commitTimeouts: Counter<Labels | 'outcome'>;
  /** Hanging transactions of the partition's producer found after a fence, by outcome (aborted, committed, refused). */
  readonly hangingTransactions: Counter<Labels | 'outcome'>;
  readonly recoveryDuration: Histogram<Labels>;
  readonly recoveredKeys: Counter<Labels>;
  /** Recovery reads that failed at the no-progress deadline, by diagnosed cause. */
  readonly recoveryStalls: Counter<Labels | 'cause'>;
  /** Restores with a local state store, by kind (delta, full) and why (checkpoint, none, or the discard cause). */
  readonly restores: Counter<Labels | 'kind' | 'reason'>;
  /** Keys taken from the local state store on restore. */
  readonly restoreLocalKeys: Counter<Labels>;
  /** Records read from the snapshot topic on restore (local state on), by kind (delta, full). */
  readonly restoreTopicRecords: Counter<Labels | 'kind'>;
  /** Local stores discarded as untrustworthy, by cause. */
  readonly localStateDiscarded: Counter<Labels | 'cause'>;
  readonly localStateWriteFailures: Counter<Labels>;
  /** Standby replicas: snapshot-partition offsets between the local copy's checkpoint and the log end, at each round's start. */
  readonly standbyLag: Gauge<Labels>;
  readonly standbyRecords: Counter<Labels>;

  private static readonly byRegistry = new WeakMap<Registry, KafkaPersistenceMetrics>();

  static of(registry: Registry): KafkaPersistenceMetrics {
    let m = KafkaPersistenceMetrics.byRegistry.get(registry);
    if (!m) {
      m = new KafkaPersistenceMetrics(registry);
      KafkaPersistenceMetrics.byRegistry.set(registry, m);
    }
    return m;
  }

  private constructor(registry: Registry) {
    const registers = [registry];
    const labelNames: Labels[] = ['flow', 'topic', 'partition'];
    this.transactions = new Counter({
      name: 'kafka_flow_snapshot_transactions_total',
      help: 'Snapshot transactions (caching mode: snapshot sends), by outcome',
      labelNames: [...labelNames, 'outcome'],
      registers,
    });
    this.transactionDuration = new Histogram({
      name: 'kafka_flow_snapshot_transaction_duration_seconds',
      help: 'Duration of a snapshot transaction (caching mode: send and offset commit)',
      labelNames,
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.records = new Counter({
      name: 'kafka_flow_snapshot_records_total',
      help: 'Snapshot records that landed, by kind (put, tombstone)',
      labelNames: [...labelNames, 'kind'],
      registers,
    });
    this.fences = new Counter({
      name: 'kafka_flow_snapshot_fences_total',
      help: 'Snapshot writes rejected because a newer owner exists, by fence reason',
      labelNames: [...labelNames, 'reason'],
      registers,
    });
    this.commitTimeouts = new Counter({
      name: 'kafka_flow_snapshot_commit_timeouts_total',
      help: 'Transaction commits without an answer (none in time, or the connection lost or the request timed out after EndTxn went out), by the outcome learned after rebuilding the producer',
      labelNames: [...labelNames, 'outcome'],
      registers,
    });
    this.hangingTransactions = new Counter({
      name: 'kafka_flow_hanging_transactions_total',
      help: "Transactions of the partition's producer found open on a partition after its coordinator ended them (their marker never written there), by outcome: aborted or committed (WriteTxnMarkers, as their coordinator decided where known), refused (e.g. no ClusterAction)",
      labelNames: [...labelNames, 'outcome'],
      registers,
    });
    this.recoveryDuration = new Histogram({
      name: 'kafka_flow_snapshot_recovery_duration_seconds',
      help: 'Duration of a partition recovery: fence, bound capture and snapshot read',
      labelNames,
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180],
      registers,
    });
    this.recoveredKeys = new Counter({
      name: 'kafka_flow_snapshot_recovered_keys_total',
      help: 'Keys recovered from the snapshot topic',
      labelNames,
      registers,
    });
    this.recoveryStalls = new Counter({
      name: 'kafka_flow_snapshot_recovery_stalls_total',
      help: 'Recovery reads that made no progress for recoveryStallTimeout, by diagnosed cause',
      labelNames: [...labelNames, 'cause'],
      registers,
    });
    this.restores = new Counter({
      name: 'kafka_flow_restores_total',
      help: 'Partition restores with local state on, by kind (delta: local state plus the records after its checkpoint; full) and reason',
      labelNames: [...labelNames, 'kind', 'reason'],
      registers,
    });
    this.restoreLocalKeys = new Counter({
      name: 'kafka_flow_restore_local_keys_total',
      help: 'Keys restored from the local state store',
      labelNames,
      registers,
    });
    this.restoreTopicRecords = new Counter({
      name: 'kafka_flow_restore_topic_records_total',
      help: 'Snapshot records read from the topic by restores with local state on, by kind (delta, full)',
      labelNames: [...labelNames, 'kind'],
      registers,
    });
    this.localStateDiscarded = new Counter({
      name: 'kafka_flow_local_state_discarded_total',
      help: 'Local state stores discarded on restore as untrustworthy, by cause',
      labelNames: [...labelNames, 'cause'],
      registers,
    });
    this.localStateWriteFailures = new Counter({
      name: 'kafka_flow_local_state_write_failures_total',
      help: 'Local state writes that failed (mirroring stops until the next assignment)',
      labelNames,
      registers,
    });
    this.standbyLag = new Gauge({
      name: 'kafka_flow_standby_lag_offsets',
      help: "A standby replica's lag: snapshot-partition offsets between its local checkpoint and the log end when its last round started",
      labelNames,
      registers,
    });
    this.standbyRecords = new Counter({
      name: 'kafka_flow_standby_records_total',
      help: 'Snapshot records standby replicas read into their local copies',
      labelNames,
      registers,
    });
  }
}
