/**
 * One write batch as records of the snapshot topic: a put (snapshot or delete marker) or a
 * tombstone (purge) per key, the outputs riding with them, and each key's change for the cache —
 * whichever writer sends them.
 */
import type { PendingOutput } from '../../core/emitted-outputs';
import type { WriteStatus } from '../../core/persistence-types';
import type { KeyWrite } from '../../flow/ports';
import type { SentRecords } from '../../kafka/errors';
import type { SnapshotMessage } from '../../kafka/transactional-writer';
import type { SnapshotUpdate } from './snapshot-cache';
import type { SnapshotFormat } from './snapshot-format';

export interface PreparedBatch {
  /** The snapshot topic's records (puts, markers, tombstones), in `updates` order. */
  readonly messages: SnapshotMessage[];
  /** Records to produce with them (dead letters). */
  readonly outputs: PendingOutput[];
  /** Each key's change, in message order (offset WRITTEN_HERE until the records' offsets are known). */
  readonly updates: SnapshotUpdate[];
  /** Each write's stored size in bytes, in write order (0: a tombstone, or nothing written for it). */
  readonly sizes: number[];
  readonly puts: number;
  readonly tombstones: number;
}

const WRITTEN_HERE = 'written by this process';

export function prepareBatch<S, V>(
  writes: readonly KeyWrite<S, V>[],
  where: { readonly snapshotTopic: string; readonly partition: number; readonly format: SnapshotFormat<S> },
): PreparedBatch {
  const { snapshotTopic, partition, format } = where;
  const messages: SnapshotMessage[] = [];
  const outputs: PendingOutput[] = [];
  const updates: SnapshotUpdate[] = [];
  const sizes: number[] = [];
  let puts = 0;
  let tombstones = 0;
  for (const w of writes) {
    // A loop, not push(...): a key may hold more outputs than a call takes arguments (maxPendingOutputs).
    if (w.outputs) for (const o of w.outputs) outputs.push(o);
    let size = 0;
    if (w.purge) {
      messages.push({ topic: snapshotTopic, partition, key: w.key, value: null });
      updates.push([w.key, undefined]);
      tombstones++;
    } else if (w.delete) {
      const bytes = format.encodeMarker({ deleted: true, offset: w.delete.offset });
      messages.push({ topic: snapshotTopic, partition, key: w.key, value: bytes });
      updates.push([w.key, { bytes, offset: WRITTEN_HERE }]);
      size = bytes.length;
      puts++;
    } else if (w.snapshot) {
      const bytes = format.encode(w.snapshot);
      messages.push({ topic: snapshotTopic, partition, key: w.key, value: bytes });
      updates.push([w.key, { bytes, offset: WRITTEN_HERE }]);
      size = bytes.length;
      puts++;
    }
    sizes.push(size);
  }
  return { messages, outputs, updates, sizes, puts, tombstones };
}

/** The batch's changes with the offsets its records landed at (`ours`: where the snapshot records went), when known. */
export function landedUpdates(prepared: PreparedBatch, ours: SentRecords | undefined): SnapshotUpdate[] {
  return ours
    ? prepared.updates.map(([key, stored], i): SnapshotUpdate => [key, stored ? { bytes: stored.bytes, offset: String(BigInt(ours.baseOffset) + BigInt(i)) } : undefined])
    : prepared.updates;
}

/** Every write of a batch that landed whole. */
export function allApplied(writes: readonly unknown[]): WriteStatus[] {
  return new Array<WriteStatus>(writes.length).fill('applied');
}
