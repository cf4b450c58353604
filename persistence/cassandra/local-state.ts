/**
 * Local state for Cassandra persistence (docs/local-state.md#cassandra): each assigned partition's
 * keys in the worker's local store (the same LMDB store as Kafka's, persistence/kafka/local-state.ts),
 * so a restart onto an intact store reads nothing from Cassandra, and a bounded state cache reads
 * the keys out of memory from it.
 *
 * Cassandra has no changelog to read a delta from, so the store is trusted only when nobody else
 * can have moved the partition on since it was written:
 *
 * - **Write-ahead.** Each batch goes to the store (one LMDB transaction: entries and checkpoint)
 *   once its outputs are produced and before any of it goes to Cassandra, so the store is never
 *   behind what this process wrote, and a state in it never stands for outputs not produced (a
 *   restore from it would not fold their records again).
 * - **Lineage.** Each ownership of a store has a random lineage id; each offset commit of the
 *   partition carries it as the commit's metadata. A restore trusts the store when the group's
 *   committed offset carries its lineage (the last commit was this store's owner) and is not past
 *   the offset the store covers — or when the group's commit is still exactly the one the store
 *   started from (its `base`: the commit, with a lineage, that its owner found when it read the
 *   partition, nothing committed since). Any other owner's commit (another worker, a worker
 *   without local state, an older version: other or no metadata) makes the store untrusted; it is
 *   discarded and the partition is read from Cassandra and written to a fresh store.
 * - Every restore starts a new lineage with the group's commit as its base, so an owner coming
 *   back to its own store and committing makes every other store of the partition untrusted, even
 *   at the same offset (a persist of timer fires alone).
 *
 * A store ahead of the committed offset (a crash between the local write and the commit) is still
 * a valid start: every key's state carries its offset and a replay skips the records it covers,
 * like the rows a full read finds ahead of the commit. But a key's state may be in the store and
 * not in Cassandra (a crash between the local write and Cassandra's): the replay skips its records,
 * so nothing would write it again, and the next commit would pass records whose state only the
 * store holds. The checkpoint therefore lists the keys written ahead whose Cassandra writes have
 * not landed (`unlanded`), and a trusted restore writes them to Cassandra before anything folds.
 * The writes that replay makes again land
 * over any row another owner left ahead of the commit without committing: it owned the partition
 * under an older generation, and the fence ('lwt' or 'timestamp') orders owners by generation —
 * which is why local state needs one of them.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { KafkaFlowError } from '../../config/errors';
import type { Logger } from '../../core/logger';
import type { WriteStatus } from '../../core/persistence-types';
import type { DueKeys, DueLook, RecoveredKey, WriteBatch } from '../../flow/ports';
import { readLocalCheckpoints } from '../kafka/local-checkpoints';
import { LocalPartitionStore, type LocalUpdate, localStatePath } from '../kafka/local-state';
import type { StoredSnapshot } from '../kafka/recovery';
import { SnapshotCache } from '../kafka/snapshot-cache';
import type { SnapshotFormat } from '../kafka/snapshot-format';
import type { CommittedPosition } from '../offset-committer';
import type { LocalMirror } from '../store-partition-persistence';

/** What an offset commit's metadata holds for a store's lineage. */
export const LINEAGE_METADATA_PREFIX = 'kafka-flow-temporal/local-state:';

/** A batch could not be written to the local store ahead of Cassandra (keys read on demand need it): the batch fails and is retried. */
export class LocalStateWriteError extends KafkaFlowError {
  constructor(where: string, cause: unknown) {
    super('LOCAL_STATE_WRITE', `${where}: the local state store refused a write (${(cause as Error)?.message ?? String(cause)}); the batch is not written to Cassandra and is retried`, { cause });
  }
}

export interface CassandraLocalStateOptions<S> {
  readonly dir: string;
  readonly flow: string;
  readonly groupId: string;
  readonly topic: string;
  readonly partition: number;
  /** `<keyspace>.<table>` of the snapshots: part of the store's identity. */
  readonly table: string;
  /** How entries are stored: the snapshot topic's record format (its due-time index reads their timers). */
  readonly format: SnapshotFormat<S>;
  /** Keys are read from the store on demand (a bounded state cache): a trusted restore yields none. */
  readonly onDemand: boolean;
  readonly log: Logger;
}

/** What a restore can start from. */
export type CassandraLocalLoad =
  /** `entries`: undefined when keys are read on demand. */
  | {
      readonly kind: 'loaded';
      readonly keys: number;
      readonly entries: Map<string, StoredSnapshot> | undefined;
      /** Keys written to the store whose Cassandra writes may not have landed: written again before folding. */
      readonly unlanded: readonly string[];
    }
  | { readonly kind: 'full'; readonly reason: string };

/** The checkpoint of a Cassandra store (JSON in the store's checkpoint record). */
interface StoreCheckpoint {
  /** The lineage its owner's commits carry. */
  readonly lineage: string;
  /** The highest offset a commit of the store's batches carries, or the commit it started from. */
  readonly covered: string;
  /** The group's commit when the owner read the partition (restored from this store or from Cassandra). */
  readonly base: CommittedPosition | null;
  /** Keys written ahead whose Cassandra writes had not landed when the checkpoint was written. */
  readonly unlanded?: readonly string[];
}

function parseCheckpoint(text: string): StoreCheckpoint | undefined {
  try {
    const c = JSON.parse(text) as Partial<StoreCheckpoint>;
    if (typeof c.lineage !== 'string' || typeof c.covered !== 'string' || !/^\d+$/.test(c.covered)) return undefined;
    const base = c.base && typeof c.base.offset === 'string' ? { offset: c.base.offset, metadata: typeof c.base.metadata === 'string' ? c.base.metadata : null } : null;
    const unlanded = Array.isArray(c.unlanded) ? c.unlanded.filter((k): k is string => typeof k === 'string') : [];
    return { lineage: c.lineage, covered: c.covered, base, unlanded };
  } catch {
    return undefined;
  }
}

/** Whether the group's commit lets a restore trust the store: its own lineage's, or still the commit it started from; else why not. */
export function untrustedBy(c: StoreCheckpoint, committed: CommittedPosition | undefined): string | undefined {
  if (!committed) return 'the group has no committed offset for the partition';
  if (committed.metadata === LINEAGE_METADATA_PREFIX + c.lineage) {
    return BigInt(committed.offset) > BigInt(c.covered) ? `the group committed offset ${committed.offset}, past the store's ${c.covered}` : undefined;
  }
  if (c.base && c.base.metadata !== null && c.base.metadata === committed.metadata && c.base.offset === committed.offset) return undefined;
  return `the group's last offset commit is not this store's (another owner committed since${committed.metadata ? '' : ', without local state'})`;
}

export class CassandraLocalState<S, V> implements LocalMirror<S, V> {
  readonly store: LocalPartitionStore;
  private lineage: string = randomUUID();
  /** The highest offset a commit of this store's batches carries (or the committed offset it started from). */
  private covered = 0n;
  /** The group's commit when this ownership read the partition. */
  private base: CommittedPosition | null = null;
  /** A local write failed with every key in memory: the store stays behind, and commits stop carrying its lineage. */
  private stopped = false;
  /** Keys written ahead whose Cassandra writes have not landed yet (the checkpoint lists them). */
  private unlanded = new Set<string>();
  /** Keys landed since the checkpoint last listed the unlanded ones: close() writes it again. */
  private landedSinceCheckpoint = false;
  /** The store has been loaded or written (its entries can be read). */
  private open = false;
  private readonly records: SnapshotCache<S>;
  private readonly where: string;

  constructor(private readonly o: CassandraLocalStateOptions<S>) {
    this.store = new LocalPartitionStore(o.dir, {
      flow: o.flow,
      groupId: o.groupId,
      snapshotTopic: `cassandra.${o.topic}`,
      partition: o.partition,
      transactionalId: `cassandra:${o.table}`,
    });
    this.where = `${o.topic}-${o.partition}`;
    this.records = new SnapshotCache<S>({ format: o.format, snapshotTopic: `${o.table} (local state)`, partition: o.partition });
  }

  /** How far the store's commits go (its freshness for the group's assignor), once loaded or written. */
  get coverage(): string | undefined {
    return this.open ? String(this.covered) : undefined;
  }

  /** The lineage id of the store (what commits carry). */
  get lineageId(): string {
    return this.lineage;
  }

  /**
   * The store if it can be trusted given the group's committed offset (`committed`, read after the
   * assignment); otherwise why not — the store is then emptied and a new lineage starts.
   */
  async load(committed: CommittedPosition | undefined): Promise<CassandraLocalLoad> {
    const loaded = await this.store.load({ readEntries: !this.o.onDemand });
    let reason: string;
    if (loaded.kind === 'loaded') {
      const c = parseCheckpoint(loaded.checkpoint.checkpoint);
      const untrusted = c ? untrustedBy(c, committed) : `checkpoint ${JSON.stringify(loaded.checkpoint.checkpoint)} is not a Cassandra store's`;
      if (untrusted === undefined) {
        // A new lineage from here, based on the commit found (written with the next batch, before any commit carries it).
        this.lineage = randomUUID();
        this.covered = BigInt(c!.covered) > BigInt(committed!.offset) ? BigInt(c!.covered) : BigInt(committed!.offset);
        this.base = committed!;
        this.open = true;
        const unlanded = c!.unlanded ?? [];
        this.unlanded = new Set(unlanded);
        this.o.log.info({ topic: this.o.topic, partition: this.o.partition, keys: loaded.checkpoint.keys, committed: committed!.offset, unlanded: unlanded.length }, `local state of ${this.where}: ${loaded.checkpoint.keys} keys, nothing to read from Cassandra`);
        return { kind: 'loaded', keys: loaded.checkpoint.keys, entries: loaded.entries, unlanded };
      }
      reason = untrusted;
    } else if (loaded.kind === 'untrusted') reason = loaded.reason;
    else reason = 'no checkpoint';
    if (loaded.kind === 'none') this.o.log.info({ topic: this.o.topic, partition: this.o.partition, path: this.store.path }, `no local state of ${this.where}: reading it from Cassandra`);
    else this.o.log.warn({ topic: this.o.topic, partition: this.o.partition, reason, path: this.store.path }, `local state of ${this.where} discarded: ${reason}; reading it from Cassandra`);
    await this.store.discard();
    this.unlanded = new Set();
    this.lineage = randomUUID();
    this.covered = committed ? BigInt(committed.offset) : 0n;
    this.base = committed ?? null;
    this.open = false;
    return { kind: 'full', reason };
  }

  /** Keys a full read from Cassandra found: written to the store (the restore writes it in chunks). */
  async restored(keys: readonly RecoveredKey<S, V>[]): Promise<void> {
    const updates: LocalUpdate[] = [];
    for (const k of keys) {
      const stored = this.encode(k.snapshot, k.deleted);
      if (stored) updates.push([k.key, stored]);
    }
    await this.write(updates);
  }

  /**
   * The batch, once its outputs are produced and before Cassandra gets it: puts and delete markers as records, purges removed, the
   * commit offset covered. A failed write with keys read on demand fails the batch (the store is
   * where they are read back from); with every key in memory the store stops following (the next
   * restore reads Cassandra) and the partition goes on.
   */
  async writeAhead(batch: WriteBatch<S, V>): Promise<readonly number[] | undefined> {
    const sizes: number[] = [];
    const updates: LocalUpdate[] = [];
    for (const w of batch.writes) {
      // A purge leaves no entry to write again: Cassandra keeps the delete marker until a later purge.
      if (!w.purge && !this.stopped) this.unlanded.add(w.key);
      if (w.purge) {
        updates.push([w.key, undefined]);
        sizes.push(0);
        continue;
      }
      const stored = this.encode(w.snapshot, w.delete);
      if (stored) updates.push([w.key, stored]);
      sizes.push(stored?.bytes.length ?? 0);
    }
    if (this.stopped) return sizes;
    const covered = batch.commitOffset !== undefined && BigInt(batch.commitOffset) > this.covered ? BigInt(batch.commitOffset) : this.covered;
    const before = this.covered;
    this.covered = covered;
    try {
      await this.write(updates);
    } catch (err) {
      this.covered = before;
      if (this.o.onDemand) throw new LocalStateWriteError(this.where, err);
      this.stopped = true;
      this.o.log.warn({ topic: this.o.topic, partition: this.o.partition, err, path: this.store.path }, 'local state write failed: the local copy stops here (the next restore reads Cassandra)');
    }
    return sizes;
  }

  /** The batch reached Cassandra: its applied keys are no longer ahead of it. */
  landed(batch: WriteBatch<S, V>, statuses: readonly WriteStatus[]): void {
    batch.writes.forEach((w, i) => {
      if (statuses[i] === 'applied' && this.unlanded.delete(w.key)) this.landedSinceCheckpoint = true;
    });
  }

  commitMetadata(): string | undefined {
    return this.stopped ? undefined : LINEAGE_METADATA_PREFIX + this.lineage;
  }

  /** Whether the store has state for a key (read now). */
  has(key: string): boolean {
    return this.open && this.store.has(key);
  }

  /** One key, read now from the store. */
  readNow(key: string): RecoveredKey<S, V> | undefined {
    if (!this.open) return undefined;
    const stored = this.store.get(key);
    return stored ? this.records.recovered<V>(key, stored) : undefined;
  }

  /** A stored entry as the engine takes it back. */
  recovered(key: string, stored: StoredSnapshot): RecoveredKey<S, V> {
    return this.records.recovered<V>(key, stored);
  }

  /** The keys out of memory with a timer due in the look's range (the store's due-time index), read now. */
  readDue(look: DueLook): DueKeys<S, V> {
    if (!this.open) return { keys: [], next: Number.POSITIVE_INFINITY };
    const skip = look.inMemory;
    const keys: RecoveredKey<S, V>[] = [];
    for (const key of this.store.dueKeys({ time: look.time, after: look.after, until: look.until, limit: look.limit, skip })) {
      const found = this.readNow(key);
      if (found) keys.push(found);
    }
    return { keys, next: this.store.nextDue(look.time, look.until, skip) };
  }

  async close(): Promise<void> {
    // Without this, the next trusted restore would write the last batch's keys to Cassandra again (harmless, not free).
    if (this.open && !this.stopped && this.landedSinceCheckpoint) await this.write([]).catch(() => undefined);
    await this.store.close();
  }

  /** A key's state or delete marker as a stored record (the snapshot topic's format). */
  private encode(snapshot: RecoveredKey<S, V>['snapshot'], deleted: { readonly offset: number } | undefined): StoredSnapshot | undefined {
    if (snapshot) return { offset: String(snapshot.offset), bytes: this.o.format.encode(snapshot) };
    if (deleted) return { offset: String(deleted.offset), bytes: this.o.format.encodeMarker({ deleted: true, offset: deleted.offset }) };
    return undefined;
  }

  private async write(updates: readonly LocalUpdate[]): Promise<void> {
    const open = this.open;
    const checkpoint: StoreCheckpoint = { lineage: this.lineage, covered: String(this.covered), base: this.base, unlanded: [...this.unlanded] };
    await this.store.write(updates, (key) => (open ? this.store.get(key) : undefined), JSON.stringify(checkpoint));
    this.open = true;
    this.landedSinceCheckpoint = false;
  }
}

/**
 * The offsets the Cassandra stores a worker finds in its state directory at start cover, by input
 * topic and partition: the group assignor's freshness hints (the last owner's store covers the
 * most), so a whole group restarting gets its own partitions back and reads nothing from Cassandra.
 */
export async function readStoredCoverage(dir: string, id: { readonly flow: string; readonly groupId: string }, topics: readonly string[]): Promise<Record<string, Record<string, string>>> {
  const out: Record<string, Record<string, string>> = {};
  for (const topic of topics) {
    const snapshotTopic = `cassandra.${topic}`;
    const first = localStatePath(dir, { ...id, snapshotTopic, partition: 0, transactionalId: '' });
    const prefix = `${path.basename(first).slice(0, -'-0'.length)}-`;
    let names: string[];
    try {
      names = fs.readdirSync(path.dirname(first));
    } catch {
      continue; // no stores of this flow yet
    }
    const partitions = names.filter((n) => n.startsWith(prefix) && /^\d+$/.test(n.slice(prefix.length))).map((n) => Number(n.slice(prefix.length)));
    const found = await readLocalCheckpoints(dir, { ...id, snapshotTopic }, partitions);
    if (found.size > 0) out[topic] = Object.fromEntries([...found].map(([p, c]) => [String(p), c]));
  }
  return out;
}
