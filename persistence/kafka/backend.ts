/**
 * The Kafka snapshot backend of one flow's input topic in one worker process: builds each assigned
 * partition's PartitionPersistence, owns the shared clients (plain producer, reader, committed
 * offsets, admin) and the snapshot topic.
 */
import type { StandbyCopy } from '../backends';
import { Registry } from 'prom-client';
import { ClosedError, ConfigError } from '../../config/errors';
import type { Codec } from '../../core/codec/codec';
import { Compressor, compressorMetrics } from '../../core/codec/compressor';
import { compressorCounters, type MetricsRegistry } from '../../core/codec/compressor-counters';
import { decodeSnapshot } from '../../core/codec/errors';
import type { Logger } from '../../core/logger';
import { silentLogger } from '../../core/logger';
import { offsetFromKafka, offsetText } from '../../flow/offsets';
import { KafkaAdmin } from '../../kafka/admin';
import type { KafkaClient } from '../../kafka/client';
import { CommittedOffsets } from '../../kafka/committed-offsets';
import { PartitionReader } from '../../kafka/partition-reader';
import { PlainWriter } from '../../kafka/plain-writer';
import { HangingTransactions, type RepairResult } from '../../kafka/hanging-transactions';
import { snapshotTransactionalId, type TransactionVersion, TransactionalWriter } from '../../kafka/transactional-writer';
import type { OffsetCommitter } from '../offset-committer';
import { isDeleteMarker, type StoredKey } from '../../core/persistence-types';
import { OutputProducer, OutputTopics } from './dead-letter';
import type { GenerationSource, OutcomeProbe, WriteGeneration } from './transactional-snapshot-writer';
import { KafkaPartitionPersistence } from './kafka-partition-persistence';
import { LocalPartitionStore } from './local-state';
import { StandbyReplica } from './standby-replica';
import { readLocalCheckpoints } from './local-checkpoints';
import { KafkaPersistenceMetrics } from './metrics';
import { readSnapshotPartition } from './recovery';
import { RestoreRound } from './restore-round';
import { lockStateDir, type StateDirLock } from './state-dir-lock';
import { type SnapshotFormat, snapshotFormat } from './snapshot-format';
import { defaultSnapshotTopic, defaultTransactionalIdPrefix, ensureSnapshotTopic } from './topic';

import { DEFAULT_MAX_WRITES_PER_TRANSACTION } from './options';

export { DEFAULT_MAX_WRITES_PER_TRANSACTION };
export const DEFAULT_RECOVERY_STALL_TIMEOUT_MS = 180_000;
/** Caching mode has no transaction to bound; the engine still hands it at most this many writes at once. */
export const CACHING_MAX_WRITES_PER_BATCH = 4096;

export interface KafkaSnapshotBackendOptions<S> {
  readonly client: KafkaClient;
  readonly flowName: string;
  readonly groupId: string;
  /** The input topic whose partitions this backend persists. */
  readonly inputTopic: string;
  /** Default `<groupId>-<flowName>-snapshots`. Exclusive to this flow and input topic. */
  readonly snapshotTopic?: string;
  /** Default `<groupId>-<flowName>`; partition p's producer is `<prefix>-snapshot-<p>`. Unique per flow. */
  readonly transactionalIdPrefix?: string;
  /** Default true (fenced); false: the caching mode (plain producer, no fencing). */
  readonly transactional?: boolean;
  /** Group-commit cap; default 2,048. */
  readonly maxWritesPerTransaction?: number;
  /** Default 3 min. */
  readonly recoveryStallTimeoutMs?: number;
  /** How often a recovery read without progress is logged; default 5 s. */
  readonly stallNoticeEveryMs?: number;
  /** Default 10,000 bytes; Infinity never compresses (the frame is still written). */
  readonly compressionThreshold?: number;
  readonly stateCodec?: Codec<S>;
  /** Snapshot topic creation; default 1 (use 3 with min.insync.replicas=2 in production). */
  readonly replicationFactor?: number;
  /** transaction.timeout.ms of the partition producers; default 60 s. */
  readonly transactionTimeoutMs?: number;
  /** How long a transaction commit may go unanswered; default 30 s. */
  readonly commitTimeoutMs?: number;
  readonly maxRequestBytes?: number;
  /** The partition producers' transaction protocol (TransactionalWriterOptions.transactionVersion); default 'auto' (2 where the cluster speaks it). */
  readonly transactionVersion?: TransactionVersion;
  readonly logger?: Logger;
  /** The process's metrics (the engine's FlowMetrics): their registry gets this backend's metrics too. */
  readonly metrics?: MetricsRegistry;
  /**
   * A local state store per partition under `dir` (Kafka Streams' state.dir): restores load it and
   * read only the snapshot records after its checkpoint. Either mode. Default off.
   * See docs/local-state.md.
   */
  readonly localState?: LocalStateOptions;
  /** Shared by a flow's backends: one restore summary line per rebalance. Default: this backend's own. */
  readonly restoreRound?: RestoreRound;
  /**
   * The input topic's dead-letter topic, when the flow dead-letters (created if absent, with the
   * input's partition count): dead letters go in the snapshot transaction (transactional) or are
   * produced first (caching).
   */
  readonly deadLetterTopic?: string;
  /** The topics the flow's fold emits to, created if absent (with the input's partition count) with the snapshot topic. */
  readonly outputTopics?: readonly string[];
}

export interface LocalStateOptions {
  /** The state directory; each worker process needs its own. */
  readonly dir: string;
  /**
   * Keys are read from the store on demand, never all loaded (the worker's bounded state cache):
   * restores read only the delta and the engine reads a key back when a record comes for it.
   */
  readonly onDemand?: boolean;
}

/** Kafka's default delete.retention.ms (1 day), when the topic's cannot be read. */
const DEFAULT_DELETE_RETENTION_MS = 86_400_000;

/** One partition's ownership, as the worker knows it when the partition is assigned. */
export interface KafkaPartitionAssignment {
  readonly topic: string;
  readonly partition: number;
  /** Default: the backend's groupId. */
  readonly groupId?: string;
  /**
   * The consumer generation, read for each transaction: a function (the live generation, e.g.
   * `() => membership.current()`), or the generation number captured at assignment with `memberId`.
   */
  readonly generation: GenerationSource | WriteGeneration | number;
  readonly memberId?: string;
  /** Caching mode: commits the input offset with the consumer's generation. */
  readonly committer?: OffsetCommitter;
  /** The committed offset at assignment (seeds the offset every transaction commits); default: fetched (require_stable). */
  readonly assignedOffset?: string | number;
  /** The worker's read of the committed offset, called once fenced (instead of fetching it again). */
  readonly committedOffset?: () => Promise<string | undefined>;
}

/** A persisted key as `inspect` prints it. */
export interface InspectedSnapshot<S> {
  readonly topic: string;
  readonly partition: number;
  readonly key: string;
  /** The offset of the last input record folded into the state. */
  readonly offset: string;
  readonly state: S;
}

export class KafkaSnapshotBackend<S, V = unknown> {
  readonly flowName: string;
  readonly groupId: string;
  readonly inputTopic: string;
  readonly snapshotTopic: string;
  readonly transactionalIdPrefix: string;
  readonly transactional: boolean;
  readonly maxWritesPerTransaction: number;
  readonly recoveryStallTimeoutMs: number;
  readonly format: SnapshotFormat<S>;
  /** Fences seen by this backend's partitions (each stops its partition until the next assignment). */
  fences = 0;
  private readonly o: KafkaSnapshotBackendOptions<S>;
  private readonly log: Logger;
  /** The fences' check for hanging transactions (one set of connections for every partition's). */
  private readonly hanging: HangingTransactions;
  private readonly metrics: KafkaPersistenceMetrics;
  private readonly admin: KafkaAdmin;
  private readonly reader: PartitionReader;
  private readonly offsets: CommittedOffsets;
  private plain: PlainWriter | undefined;
  private readonly outputTopics: OutputTopics;
  private topicReady: Promise<void> | undefined;
  private readonly partitions = new Map<number, KafkaPartitionPersistence<S, V>>();
  /** Warm copies of partitions this worker does not own (standbyReplicas), by partition. */
  private readonly standbys = new Map<number, StandbyReplica>();
  /** The standby copies' reader: connections of their own, so their fetches never queue the owners' restores. */
  private standbyReader: PartitionReader | undefined;
  /** The checkpoints of the stores this worker's previous run left in its state directory (read once, at start). */
  private diskCheckpoints = new Map<number, string>();
  private closed = false;
  private readonly restoreRound: RestoreRound | undefined;
  private deleteRetention: Promise<number> | undefined;
  private stateDirLock: StateDirLock | undefined;

  constructor(options: KafkaSnapshotBackendOptions<S>) {
    const max = options.maxWritesPerTransaction ?? DEFAULT_MAX_WRITES_PER_TRANSACTION;
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`maxWritesPerTransaction must be a whole number ≥ 1, got ${max}`);
    this.o = options;
    this.flowName = options.flowName;
    this.groupId = options.groupId;
    this.inputTopic = options.inputTopic;
    this.snapshotTopic = options.snapshotTopic ?? defaultSnapshotTopic(options.groupId, options.flowName);
    this.transactionalIdPrefix = options.transactionalIdPrefix ?? defaultTransactionalIdPrefix(options.groupId, options.flowName);
    this.transactional = options.transactional ?? true;
    this.maxWritesPerTransaction = max;
    this.recoveryStallTimeoutMs = options.recoveryStallTimeoutMs ?? DEFAULT_RECOVERY_STALL_TIMEOUT_MS;
    this.log = options.logger ?? silentLogger;
    const registry = options.metrics?.registry ?? new Registry();
    this.hanging = new HangingTransactions(options.client);
    this.metrics = KafkaPersistenceMetrics.of(registry);
    this.format = snapshotFormat<S>({
      stateCodec: options.stateCodec,
      compressor: new Compressor({
        compressionThreshold: options.compressionThreshold,
        metrics: compressorMetrics(`${options.flowName}-snapshots`, compressorCounters(registry)),
      }),
    });
    this.admin = new KafkaAdmin(options.client);
    this.reader = new PartitionReader(options.client);
    this.offsets = new CommittedOffsets(options.client);
    this.outputTopics = new OutputTopics(this.admin, { replicationFactor: options.replicationFactor, logger: this.log });
    if (options.localState) {
      if (!options.localState.dir) throw new ConfigError(`flow "${options.flowName}": persistence.localState.dir is empty`);
      // One worker process per state directory: throws StateDirLockedError; released by close().
      this.stateDirLock = lockStateDir(options.localState.dir);
      this.restoreRound = options.restoreRound ?? new RestoreRound(options.flowName, this.log);
    }
  }

  /** The local state directory, when local state is on. */
  get stateDir(): string | undefined {
    return this.o.localState?.dir;
  }

  /**
   * Creates the snapshot topic (compacted, `inputPartitionCount` partitions; default: the input
   * topic's count) or checks the existing one. Throws SnapshotTopicMismatchError on a partition
   * count or cleanup policy that does not fit.
   */
  ensureTopic(inputPartitionCount?: number): Promise<void> {
    if (!this.topicReady) {
      this.topicReady = (async () => {
        const partitions = inputPartitionCount ?? (await this.inputPartitionCount());
        if (this.o.localState) {
          // For the assignor's first join: which partitions this worker has fresh local state of.
          const dir = this.o.localState.dir;
          void readLocalCheckpoints(dir, { flow: this.flowName, groupId: this.groupId, snapshotTopic: this.snapshotTopic }, [...Array(partitions).keys()]).then((found) => {
            this.diskCheckpoints = found;
          });
        }
        const outcome = await ensureSnapshotTopic(this.admin, {
          topic: this.snapshotTopic,
          partitions,
          replicationFactor: this.o.replicationFactor,
        });
        if (this.o.deadLetterTopic) await this.outputTopics.ensure(this.o.deadLetterTopic, partitions);
        for (const topic of this.o.outputTopics ?? []) await this.outputTopics.ensure(topic, partitions);
        this.log.info({ flow: this.flowName, snapshotTopic: this.snapshotTopic, partitions, outcome }, 'snapshot topic ready');
      })();
      this.topicReady.catch(() => {
        this.topicReady = undefined; // try again next time
      });
    }
    return this.topicReady;
  }

  /**
   * The persistence of one assigned input partition. Transactional mode fences first: the
   * partition's producer is initialized (aborting what a crashed owner left open) before this
   * returns, so the recovery read that follows sees only settled transactions of its own id.
   */
  async forPartition(a: KafkaPartitionAssignment): Promise<KafkaPartitionPersistence<S, V>> {
    if (this.closed) throw new ClosedError('KafkaSnapshotBackend');
    if (a.topic !== this.inputTopic) {
      throw new RangeError(`this backend persists input topic "${this.inputTopic}", not "${a.topic}"`);
    }
    await this.ensureTopic();
    // Its standby copy here stops: the owner's store (made below) takes the directory over.
    this.dropStandby(a.partition);
    const previous = this.partitions.get(a.partition);
    if (previous) {
      this.partitions.delete(a.partition);
      await previous.close().catch(() => undefined);
    }
    const input = { topic: a.topic, partition: a.partition };
    const groupId = a.groupId ?? this.groupId;
    const common = {
      flow: this.flowName,
      input,
      snapshotTopic: this.snapshotTopic,
      format: this.format,
      reader: this.reader,
      recoveryStallTimeoutMs: this.recoveryStallTimeoutMs,
      noticeEveryMs: this.o.stallNoticeEveryMs,
      logger: this.log,
      metrics: this.metrics,
      onFence: () => {
        this.fences++;
      },
      outputs: this.outputTopics,
    };
    let persistence: KafkaPartitionPersistence<S, V>;
    if (this.transactional) {
      const transactions = new TransactionalWriter({
        client: this.o.client,
        transactionalIdPrefix: this.transactionalIdPrefix,
        partition: a.partition,
        groupId,
        inputTopic: a.topic,
        transactionTimeoutMs: this.o.transactionTimeoutMs,
        commitTimeoutMs: this.o.commitTimeoutMs,
        maxRequestBytes: this.o.maxRequestBytes,
        transactionVersion: this.o.transactionVersion,
        hangingScope: () => [
          { topic: this.snapshotTopic, partitions: [a.partition] },
          ...[this.o.deadLetterTopic, ...(this.o.outputTopics ?? [])].filter((t): t is string => t !== undefined).map((topic) => ({ topic })),
        ],
        onHangingCheck: (outcome) => this.reportHangingCheck(a.topic, a.partition, outcome),
        hanging: this.hanging,
      });
      persistence = new KafkaPartitionPersistence<S, V>({
        ...common,
        mode: 'transactional',
        maxWritesPerBatch: this.maxWritesPerTransaction,
        transactions,
        generation: generationSource(a),
        assignedOffset: 0, // set below, once fenced
        probe: this.probe(groupId, a.topic, a.partition),
        local: this.localHook(groupId, a.partition),
      });
      await persistence.fenceNow();
      const seed =
        a.assignedOffset ?? (a.committedOffset ? await a.committedOffset() : (await this.offsets.fetch(groupId, a.topic, [a.partition])).get(a.partition)) ?? 0;
      persistence.seedOffset(typeof seed === 'number' ? seed : offsetFromKafka(seed));
    } else {
      if (!a.committer) throw new TypeError('caching mode needs the consumer\'s OffsetCommitter');
      this.plain ??= new PlainWriter({ client: this.o.client, maxRequestBytes: this.o.maxRequestBytes });
      persistence = new KafkaPartitionPersistence<S, V>({
        ...common,
        mode: 'caching',
        maxWritesPerBatch: CACHING_MAX_WRITES_PER_BATCH,
        sender: this.plain,
        outputSender: new OutputProducer(this.outputTopics, this.plain),
        committer: a.committer,
        local: this.localHook(groupId, a.partition),
      });
    }
    this.partitions.set(a.partition, persistence);
    return persistence;
  }

  /**
   * The partition's local state store and what its restores need, with local state on. Its
   * identity names the partition's transactional.id in both modes, so a switch between them keeps
   * the store (either mode's writes are a prefix of the same topic).
   */
  private localHook(groupId: string, partition: number) {
    const local = this.o.localState;
    if (!local) return undefined;
    return {
      store: new LocalPartitionStore(local.dir, {
        flow: this.flowName,
        groupId,
        snapshotTopic: this.snapshotTopic,
        partition,
        transactionalId: snapshotTransactionalId(this.transactionalIdPrefix, partition),
      }),
      deleteRetentionMs: () => this.deleteRetentionMs(),
      round: this.restoreRound,
      onDemand: local.onDemand === true,
    };
  }

  /**
   * Every persisted key, read from the snapshot topic without a group and without fencing anyone
   * (what `kafka-flow-temporal inspect` prints). One partition, or all of them.
   */
  async *readAll(partition?: number): AsyncIterable<InspectedSnapshot<S>> {
    const partitions =
      partition !== undefined ? [partition] : Array.from({ length: await this.snapshotPartitionCount() }, (_, p) => p);
    const reader = new PartitionReader(this.o.client);
    try {
      for (const p of partitions) {
        const read = await readSnapshotPartition({
          reader,
          topic: this.snapshotTopic,
          partition: p,
          stallTimeoutMs: this.recoveryStallTimeoutMs,
          noticeEveryMs: this.o.stallNoticeEveryMs,
          logger: this.log,
        });
        for (const [key, stored] of read.snapshots) {
          const snapshot: StoredKey<S> = decodeSnapshot(this.format, stored.bytes, {
            topic: this.snapshotTopic,
            partition: p,
            key,
            offset: stored.offset,
          });
          if (isDeleteMarker(snapshot)) continue; // a deleted key awaiting its purge
          yield { topic: this.inputTopic, partition: p, key, offset: offsetText(snapshot.offset), state: snapshot.state };
        }
      }
    } finally {
      await reader.close();
    }
  }

  /** The persistence currently built for a partition, if any. */
  partition(partition: number): KafkaPartitionPersistence<S, V> | undefined {
    return this.partitions.get(partition);
  }

  /**
   * The partitions this worker keeps a standby copy of (the group's assignment said so): started
   * for those new to the set and not owned here, stopped for those no longer in it. Local state only.
   */
  standby(partitions: readonly number[]): void {
    const local = this.o.localState;
    if (!local || this.closed) return;
    const wanted = new Set(partitions.filter((p) => !this.partitions.has(p)));
    for (const p of [...this.standbys.keys()]) if (!wanted.has(p)) this.dropStandby(p);
    for (const partition of wanted) {
      if (this.standbys.has(partition)) continue;
      this.standbyReader ??= new PartitionReader(this.o.client);
      const replica = new StandbyReplica({
        flow: this.flowName,
        input: { topic: this.inputTopic, partition },
        snapshotTopic: this.snapshotTopic,
        reader: this.standbyReader,
        local: {
          store: new LocalPartitionStore(local.dir, {
            flow: this.flowName,
            groupId: this.groupId,
            snapshotTopic: this.snapshotTopic,
            partition,
            transactionalId: snapshotTransactionalId(this.transactionalIdPrefix, partition),
          }),
          deleteRetentionMs: () => this.deleteRetentionMs(),
        },
        stallTimeoutMs: this.recoveryStallTimeoutMs,
        log: this.log,
        metrics: this.metrics,
      });
      this.standbys.set(partition, replica);
      replica.start();
    }
  }

  /** Each local copy's checkpoint (snapshot-partition offset), owned or standby, by partition. */
  localCheckpoints(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const [p, c] of this.diskCheckpoints) out[p] = c;
    for (const [p, r] of this.standbys) if (r.checkpoint !== undefined) out[p] = r.checkpoint;
    for (const [p, persistence] of this.partitions) {
      const c = persistence.localCheckpoint;
      if (c !== undefined) out[p] = c;
    }
    return out;
  }

  /** The standby copies and their lag (snapshot-partition offsets behind the log end at their last round). */
  standbyStatus(): StandbyCopy[] {
    return [...this.standbys].map(([partition, r]) => ({
      topic: this.inputTopic,
      partition,
      ...(r.checkpoint !== undefined ? { checkpoint: r.checkpoint } : {}),
      ...(r.lag !== undefined ? { lag: r.lag } : {}),
    }));
  }

  private dropStandby(partition: number): void {
    const replica = this.standbys.get(partition);
    if (!replica) return;
    this.standbys.delete(partition);
    void replica.stop();
  }

  /** Closes one partition's producer (the partition was revoked for good). */
  async release(partition: number): Promise<void> {
    const p = this.partitions.get(partition);
    this.partitions.delete(partition);
    await p?.close();
  }

  async close(): Promise<void> {
    this.closed = true;
    const standbys = [...this.standbys.values()];
    this.standbys.clear();
    await Promise.all(standbys.map((r) => r.stop()));
    await this.standbyReader?.close().catch(() => undefined);
    const closers = [...this.partitions.values()].map((p) => () => p.close());
    this.partitions.clear();
    for (const close of [
      ...closers,
      () => this.plain?.close(),
      () => this.reader.close(),
      () => this.offsets.close(),
      () => this.hanging.close(),
      () => this.admin.close(),
    ]) {
      try {
        await close();
      } catch (err) {
        this.log.warn({ err }, 'closing the Kafka snapshot backend');
      }
    }
    this.stateDirLock?.release();
  }

  /** What a fence's check for hanging transactions found (kafka/hanging-transactions.ts): logged and counted. */
  private reportHangingCheck(topic: string, partition: number, outcome: { result: RepairResult } | { error: unknown }): void {
    const where = { flow: this.flowName, topic, partition };
    if ('error' in outcome) {
      this.log.warn({ ...where, err: outcome.error }, 'could not check for hanging transactions after the fence; the next fence checks again');
      return;
    }
    const { aborted, refused, unchecked } = outcome.result;
    const labels = { flow: this.flowName, topic, partition: String(partition) };
    for (const h of aborted) {
      this.metrics.hangingTransactions.inc({ ...labels, outcome: 'aborted' });
      this.log.warn({ ...where, hanging: h }, 'aborted a hanging transaction of this partition\'s producer: its coordinator had ended it without a marker on that partition, where read_committed readers (or the group\'s offsets) were stuck at its first offset');
    }
    for (const h of outcome.result.committed) {
      this.metrics.hangingTransactions.inc({ ...labels, outcome: 'committed' });
      this.log.warn({ ...where, hanging: h }, "committed a hanging transaction of this partition's producer on a partition that missed its marker: its coordinator had committed it");
    }
    for (const h of refused) {
      this.metrics.hangingTransactions.inc({ ...labels, outcome: 'refused' });
      this.log.error(
        { ...where, hanging: h, command: `kafka-transactions.sh --bootstrap-server <broker> abort --topic ${h.topic} --partition ${h.partition} --start-offset ${h.startOffset}` },
        `a hanging transaction of this partition's producer could not be aborted (${h.error}; WriteTxnMarkers needs ClusterAction on the cluster): readers of that partition stay stuck at its first offset until an operator aborts it`,
      );
    }
    if (unchecked.length > 0) this.log.warn({ ...where, unchecked }, 'some partitions could not be checked for hanging transactions');
  }

  private probe(groupId: string, topic: string, partition: number): OutcomeProbe {
    return {
      recordCommitted: async (sent) => {
        let visible = false;
        await this.reader.read({
          topic: sent.topic,
          partition: sent.partition,
          fromOffset: sent.baseOffset,
          toOffset: String(BigInt(sent.baseOffset) + 1n),
          stallTimeoutMs: this.recoveryStallTimeoutMs,
          onRecords: (records) => {
            if (records.some((r) => r.offset === sent.baseOffset)) visible = true;
          },
        });
        return visible;
      },
      committedOffset: async () => {
        const offset = (await this.offsets.fetch(groupId, topic, [partition])).get(partition);
        return offset === null || offset === undefined ? undefined : offsetFromKafka(offset);
      },
    };
  }

  /** The snapshot topic's delete.retention.ms (read once). */
  private deleteRetentionMs(): Promise<number> {
    if (!this.deleteRetention) {
      this.deleteRetention = this.admin.describeTopic(this.snapshotTopic, ['delete.retention.ms']).then((t) => {
        const ms = Number(t?.config['delete.retention.ms']);
        return Number.isFinite(ms) && ms > 0 ? ms : DEFAULT_DELETE_RETENTION_MS;
      });
      this.deleteRetention.catch(() => {
        this.deleteRetention = undefined;
      });
    }
    return this.deleteRetention;
  }

  private async inputPartitionCount(): Promise<number> {
    const input = await this.admin.describeTopic(this.inputTopic);
    if (!input) throw new RangeError(`input topic "${this.inputTopic}" does not exist: cannot size the snapshot topic`);
    return input.partitions;
  }

  private async snapshotPartitionCount(): Promise<number> {
    const topic = await this.admin.describeTopic(this.snapshotTopic);
    if (!topic) throw new RangeError(`snapshot topic "${this.snapshotTopic}" does not exist`);
    return topic.partitions;
  }
}

function generationSource(a: KafkaPartitionAssignment): GenerationSource {
  const g = a.generation;
  if (typeof g === 'function') return g;
  if (typeof g === 'number') {
    const fixed = { generationId: g, memberId: a.memberId ?? '' };
    return () => fixed;
  }
  return () => g;
}
