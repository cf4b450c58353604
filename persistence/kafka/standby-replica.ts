/**
 * A warm copy of a partition this worker does not own (Kafka Streams' standby task): the snapshot
 * partition tailed into this worker's local store — read_committed, from the store's checkpoint,
 * round after round — so that when the partition comes here (a failover, a rebalance that prefers
 * the freshest copy) its restore reads only what was written since the last round. It only reads:
 * it never fences, never writes to Kafka. The store and its checks are the owner's
 * (local-state-manager.ts); when the partition is assigned here, the owner's store takes the
 * directory over (local-state.ts) and this copy stops.
 */
import type { Logger } from '../../core/logger';
import { LocalStateSupersededError } from './local-state';
import { type LocalStateHook, LocalStateManager } from './local-state-manager';
import type { KafkaPersistenceMetrics } from './metrics';
import { scopeLabels } from './partition-scope';
import { readSnapshotPartition, type SnapshotLogReader } from './recovery';
import { deltaOf } from './snapshot-restorer';

export interface StandbyReplicaOptions {
  readonly flow: string;
  readonly input: { readonly topic: string; readonly partition: number };
  readonly snapshotTopic: string;
  readonly reader: SnapshotLogReader;
  /** The store (its identity the owner's) and the retention check's source; keys are not loaded. */
  readonly local: Omit<LocalStateHook, 'round' | 'onDemand'>;
  readonly stallTimeoutMs: number;
  /** The pause between two rounds; default 1 s. */
  readonly everyMs?: number;
  readonly log: Logger;
  readonly metrics?: KafkaPersistenceMetrics;
}

export class StandbyReplica {
  private readonly manager: LocalStateManager;
  private readonly labels: { flow: string; topic: string; partition: string };
  private stopped = false;
  private wake: (() => void) | undefined;
  private running: Promise<void> | undefined;
  /** The store's checkpoint after the last round (undefined before the first). */
  checkpoint: string | undefined;
  /** Snapshot-partition offsets between the checkpoint and the log end when the last round started. */
  lag: number | undefined;

  constructor(private readonly o: StandbyReplicaOptions) {
    const { flow, input, snapshotTopic, reader, log, metrics } = o;
    // It only reads (its writes are restores): whether the owner's writes carry commit markers does not matter here.
    this.manager = new LocalStateManager({ ...o.local, onDemand: true }, { flow, input, snapshotTopic, reader, log, metrics, commitMarkers: true });
    this.labels = scopeLabels({ flow, input, snapshotTopic, log });
  }

  start(): void {
    this.running ??= this.loop();
  }

  /** Stops after the round in progress and closes the store (cleanly, unless the owner took it over). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
    await this.manager.close().catch(() => undefined);
    this.o.metrics?.standbyLag.remove(this.labels);
  }

  private async loop(): Promise<void> {
    const { input, snapshotTopic, reader, log } = this.o;
    const where = { flow: this.o.flow, topic: input.topic, partition: input.partition, snapshotTopic };
    try {
      const loaded = await this.manager.load();
      this.checkpoint = loaded.kind === 'loaded' ? loaded.checkpoint : undefined;
      log.info({ ...where, checkpoint: this.checkpoint, keys: loaded.kind === 'loaded' ? loaded.keys : 0 }, `standby replica of ${snapshotTopic}-${input.partition} started`);
      while (!this.stopped) {
        const logEnd = BigInt(await reader.logEndOffset(snapshotTopic, input.partition));
        this.lag = Number(logEnd - BigInt(this.checkpoint ?? (await reader.logStartOffset(snapshotTopic, input.partition))));
        this.o.metrics?.standbyLag.set(this.labels, this.lag);
        // Up to the last stable offset: the owner's open transaction is not waited for (next round).
        const read = await readSnapshotPartition({
          reader,
          topic: snapshotTopic,
          partition: input.partition,
          stallTimeoutMs: this.o.stallTimeoutMs,
          fromOffset: this.checkpoint,
          upToLastStable: true,
        });
        if (this.stopped) break;
        const store = this.o.local.store;
        // Without a checkpoint the store was emptied (and is not open yet): nothing is in it.
        const delta = deltaOf(read, this.checkpoint === undefined ? () => undefined : (key) => store.get(key));
        this.manager.restored(delta.updates, (k) => delta.previous.get(k), read.bound);
        await this.manager.done();
        if (this.manager.broken) throw new Error('the local write failed');
        this.checkpoint = read.bound;
        this.o.metrics?.standbyRecords.inc(this.labels, read.records);
        await this.pause();
      }
    } catch (err) {
      if (err instanceof LocalStateSupersededError || this.stopped) return; // the owner's store took it over, or stopping
      log.warn({ ...where, err }, `standby replica of ${snapshotTopic}-${input.partition} stopped: its restore, if the partition comes here, reads more of the topic`);
    }
  }

  private pause(): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, this.o.everyMs ?? 1000);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
