import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { compressorCounters } from '../core/codec/compressor-counters';

type PartitionLabels = 'flow' | 'topic' | 'partition';

/**
 * The engine's Prometheus metrics, on one registry the process exposes. Labels stay low-cardinality
 * (flow, topic, partition; never a key). Metrics are created once per registry, so several flows
 * and partitions share them.
 */
export class FlowMetrics {
  readonly recordsFolded: Counter<PartitionLabels>;
  readonly recordsSkipped: Counter<PartitionLabels>;
  readonly keylessDropped: Counter<PartitionLabels>;
  readonly decodeFailures: Counter<PartitionLabels | 'policy'>;
  readonly foldFailures: Counter<PartitionLabels | 'policy'>;
  readonly deadLetters: Counter<PartitionLabels | 'reason'>;
  readonly outputs: Counter<PartitionLabels | 'output_topic'>;
  /** Seconds a partition's fold waited for its outputs to land (maxPendingOutputs reached). */
  readonly outputsWait: Counter<PartitionLabels>;
  readonly keysLive: Gauge<PartitionLabels>;
  readonly keysLiveBytes: Gauge<PartitionLabels>;
  readonly persists: Counter<PartitionLabels | 'reason' | 'outcome'>;
  readonly persistDuration: Histogram<PartitionLabels | 'reason'>;
  readonly persistedKeys: Counter<PartitionLabels | 'outcome'>;
  readonly commits: Counter<PartitionLabels | 'outcome'>;
  readonly commitDuration: Histogram<PartitionLabels>;
  readonly keysEvicted: Counter<PartitionLabels>;
  /** Keys out of memory read back from the store because a timer of theirs came due (a bounded state cache). */
  readonly keysReadForTimers: Counter<PartitionLabels>;
  /** Key timers fired (`kind` timer: onTimer ran; ttl: the key expired by stateTtl). */
  readonly timersFired: Counter<PartitionLabels | 'kind'>;
  /** Input records the topic's retention deleted before the flow folded them (skipped; each time logged as an error). */
  readonly inputDeletedUnfolded: Counter<PartitionLabels>;
  /** Bytes of state before compression (kafka-flow's name), by compressor `component`. */
  readonly compressorRawBytes: Counter<'component'>;
  /** Bytes after compression, header included (kafka-flow's name), by compressor `component`. */
  readonly compressorCompressedBytes: Counter<'component'>;

  private static readonly byRegistry = new WeakMap<Registry, FlowMetrics>();

  /** The metrics registered on `registry` (created on first use). Default: a fresh registry. */
  static of(registry: Registry = new Registry()): FlowMetrics {
    let metrics = FlowMetrics.byRegistry.get(registry);
    if (!metrics) {
      metrics = new FlowMetrics(registry);
      FlowMetrics.byRegistry.set(registry, metrics);
    }
    return metrics;
  }

  private constructor(readonly registry: Registry) {
    const registers = [registry];
    const labels: PartitionLabels[] = ['flow', 'topic', 'partition'];
    this.recordsFolded = new Counter({
      name: 'kafka_flow_records_folded_total',
      help: 'Input records folded into key state',
      labelNames: labels,
      registers,
    });
    this.recordsSkipped = new Counter({
      name: 'kafka_flow_records_skipped_total',
      help: 'Input records skipped because their key state already included them (redelivery after recovery)',
      labelNames: labels,
      registers,
    });
    this.keylessDropped = new Counter({
      name: 'kafka_flow_keyless_records_dropped_total',
      help: 'Input records without a key, dropped',
      labelNames: labels,
      registers,
    });
    this.decodeFailures = new Counter({
      name: 'kafka_flow_decode_failures_total',
      help: 'Input records whose value could not be decoded, by decode-failure policy',
      labelNames: [...labels, 'policy'],
      registers,
    });
    this.foldFailures = new Counter({
      name: 'kafka_flow_fold_failures_total',
      help: 'Input records the fold threw on, by fold-failure policy',
      labelNames: [...labels, 'policy'],
      registers,
    });
    this.deadLetters = new Counter({
      name: 'kafka_flow_dead_letters_total',
      help: 'Records that landed in the dead-letter topic, by reason (decode, fold)',
      labelNames: [...labels, 'reason'],
      registers,
    });
    this.outputs = new Counter({
      name: 'kafka_flow_outputs_total',
      help: 'Records emitted by the fold (ctx.emit) that landed with their key write, by output topic',
      labelNames: [...labels, 'output_topic'],
      registers,
    });
    this.outputsWait = new Counter({
      name: 'kafka_flow_outputs_wait_seconds_total',
      help: 'Time the fold waited with maxPendingOutputs outputs not landed (backpressure from the output writes)',
      labelNames: labels,
      registers,
    });
    this.keysLive = new Gauge({
      name: 'kafka_flow_keys_live',
      help: 'Keys held in memory',
      labelNames: labels,
      registers,
    });
    this.keysLiveBytes = new Gauge({
      name: 'kafka_flow_keys_live_bytes',
      help: 'Bytes of the keys held in memory as the bounded state cache counts them (each key: its stored record size + 200); set only with stateCache',
      labelNames: labels,
      registers,
    });
    this.persists = new Counter({
      name: 'kafka_flow_persists_total',
      help: 'Persist runs, by reason (periodic, outputs, idle, revoke, shutdown) and outcome (ok, failed)',
      labelNames: [...labels, 'reason', 'outcome'],
      registers,
    });
    this.persistDuration = new Histogram({
      name: 'kafka_flow_persist_duration_seconds',
      help: 'Duration of a persist run, writes and commit included',
      labelNames: [...labels, 'reason'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers,
    });
    this.persistedKeys = new Counter({
      name: 'kafka_flow_persisted_keys_total',
      help: 'Key writes (snapshot, journal, delete), by outcome (applied, not_applied, failed)',
      labelNames: [...labels, 'outcome'],
      registers,
    });
    this.commits = new Counter({
      name: 'kafka_flow_offset_commits_total',
      help: 'Input offset commits, by outcome (ok, failed)',
      labelNames: [...labels, 'outcome'],
      registers,
    });
    this.commitDuration = new Histogram({
      name: 'kafka_flow_offset_commit_duration_seconds',
      help: 'Duration of a write batch that carried an offset commit',
      labelNames: labels,
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers,
    });
    this.keysEvicted = new Counter({
      name: 'kafka_flow_keys_evicted_total',
      help: 'Keys unloaded from memory (unloadOrphaned, revoke)',
      labelNames: labels,
      registers,
    });
    this.keysReadForTimers = new Counter({
      name: 'kafka_flow_keys_read_for_timers_total',
      help: 'Keys out of memory read back from the local store because a timer of theirs came due (bounded state cache)',
      labelNames: labels,
      registers,
    });
    this.timersFired = new Counter({
      name: 'kafka_flow_timers_fired_total',
      help: 'Key timers fired, by kind (timer: onTimer ran; ttl: the key expired by stateTtl)',
      labelNames: [...labels, 'kind'],
      registers,
    });
    this.inputDeletedUnfolded = new Counter({
      name: 'kafka_flow_input_records_deleted_unfolded_total',
      help: "Input records the topic's retention deleted before the flow folded them (skipped, logged as an error)",
      labelNames: labels,
      registers,
    });
    // Registered with the engine's metrics (they are on /metrics from the start); the backends' compressors count into them.
    const compressor = compressorCounters(registry);
    this.compressorRawBytes = compressor.raw;
    this.compressorCompressedBytes = compressor.compressed;
  }

  /** Children bound to one partition, so the hot path does not hash labels per call. */
  forPartition(flow: string, topic: string, partition: number): PartitionMetrics {
    const l = { flow, topic, partition: String(partition) };
    // Children with one more label are made once per value: persistedKeys is counted per key written.
    const once = <T>(make: (value: string) => T) => {
      const made = new Map<string, T>();
      return (value: string): T => {
        let child = made.get(value);
        if (child === undefined) {
          child = make(value);
          made.set(value, child);
        }
        return child;
      };
    };
    const persists = once((key) => {
      const [reason, outcome] = key.split('\u0000') as [string, string];
      return this.persists.labels({ ...l, reason, outcome });
    });
    return {
      recordsFolded: this.recordsFolded.labels(l),
      recordsSkipped: this.recordsSkipped.labels(l),
      keylessDropped: this.keylessDropped.labels(l),
      decodeFailures: once((policy) => this.decodeFailures.labels({ ...l, policy })),
      foldFailures: once((policy) => this.foldFailures.labels({ ...l, policy })),
      deadLetters: once((reason) => this.deadLetters.labels({ ...l, reason })),
      outputs: once((outputTopic) => this.outputs.labels({ ...l, output_topic: outputTopic })),
      keysLive: this.keysLive.labels(l),
      keysLiveBytes: this.keysLiveBytes.labels(l),
      persists: (reason: string, outcome: 'ok' | 'failed') => persists(`${reason}\u0000${outcome}`),
      persistDuration: once((reason) => this.persistDuration.labels({ ...l, reason })),
      persistedKeys: once((outcome) => this.persistedKeys.labels({ ...l, outcome })) as (outcome: 'applied' | 'not_applied' | 'failed') => CounterChild,
      commits: once((outcome) => this.commits.labels({ ...l, outcome })) as (outcome: 'ok' | 'failed') => CounterChild,
      commitDuration: this.commitDuration.labels(l),
      keysEvicted: this.keysEvicted.labels(l),
      keysReadForTimers: this.keysReadForTimers.labels(l),
      timersFired: once((kind) => this.timersFired.labels({ ...l, kind })) as (kind: 'timer' | 'ttl') => CounterChild,
    };
  }
}

type CounterChild = { inc(value?: number): void };

export interface PartitionMetrics {
  recordsFolded: CounterChild;
  recordsSkipped: CounterChild;
  keylessDropped: CounterChild;
  decodeFailures(policy: string): CounterChild;
  foldFailures(policy: string): CounterChild;
  deadLetters(reason: string): CounterChild;
  outputs(outputTopic: string): CounterChild;
  keysLive: { set(value: number): void };
  keysLiveBytes: { set(value: number): void };
  persists(reason: string, outcome: 'ok' | 'failed'): CounterChild;
  persistDuration(reason: string): { observe(value: number): void };
  persistedKeys(outcome: 'applied' | 'not_applied' | 'failed'): CounterChild;
  commits(outcome: 'ok' | 'failed'): CounterChild;
  commitDuration: { observe(value: number): void };
  keysEvicted: CounterChild;
  keysReadForTimers: CounterChild;
  timersFired(kind: 'timer' | 'ttl'): CounterChild;
}
