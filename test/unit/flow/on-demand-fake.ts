// An in-memory FAKE of the local-state backend's on-demand mode (a bounded state cache), for the
// engine's unit tests: the in-memory backend's partition persistence whose recover() yields nothing,
// `has` answered from its Map (snapshots and delete markers), and the store's due-time lookup
// (`readDue`) answered by scanning its snapshots' timers. The real one is LMDB's index
// (persistence/kafka/local-state.ts).
import type { DueKeys, DueLook, PartitionPersistence, RecoveredKey } from '../../../flow/ports';
import type { InMemoryBackend } from '../../../persistence/memory';
import { TP } from './harness';

/** The in-memory backend read on demand, with a fake of the store's due-time lookup over its snapshots. */
export function onDemandWithFakeDueIndex<S>(backend: InMemoryBackend<S, string>, looks: { count: number } = { count: 0 }): PartitionPersistence<S, string> {
  const inner = backend.forPartition(TP, 'snapshots');
  return {
    maxWritesPerBatch: inner.maxWritesPerBatch,
    recover: () => ({
      [Symbol.asyncIterator]: () => ({ next: async (): Promise<IteratorResult<RecoveredKey<S, string>>> => ({ value: undefined, done: true }) }),
    }),
    read: (key) => inner.read(key),
    write: (batch) => inner.write(batch),
    has: (key) => backend.snapshots.has(TP, key),
    readDue: ({ time, after, until, limit, inMemory }: DueLook): DueKeys<S, string> => {
      looks.count++;
      const keys: RecoveredKey<S, string>[] = [];
      let next = Number.POSITIVE_INFINITY;
      for (const [key, snapshot] of backend.snapshots.entries(TP)) {
        if (inMemory(key)) continue;
        let due = false;
        for (const t of snapshot.timers ?? []) {
          if (t.time !== time) continue;
          if (t.at <= until && t.at > after) due = true;
          else if (t.at > until) next = Math.min(next, t.at);
        }
        if (due && keys.length < limit) keys.push({ key, snapshot });
      }
      return { keys, next };
    },
  };
}


/**
 * The same fake with the store's synchronous read (`readNow`, as the local store has): a record for
 * a key out of memory folds at once instead of waiting for `read`.
 */
export function withReadNow<S>(p: PartitionPersistence<S, string>, backend: InMemoryBackend<S, string>): PartitionPersistence<S, string> {
  return {
    ...p,
    readNow: (key) => {
      const snapshot = backend.snapshots.entries(TP).get(key);
      if (snapshot) return { key, snapshot };
      const marker = backend.snapshots.markers(TP).get(key);
      return marker === undefined ? undefined : { key, deleted: { offset: marker } };
    },
  };
}
