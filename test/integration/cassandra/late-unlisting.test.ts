/**
 * Fencing 'lwt' (the defaults): a purge's unlisting that lands after another engine stored the key
 * again must not leave that key's row unlisted. Two engines of one partition on their own clients:
 * the older one (a stale owner, or an earlier engine of the same generation in one process) purges
 * its delete marker and is paused between the purge and its keys-table removal; meanwhile the
 * newer one writes the key again and lists it; then the older one's removal lands. A recovery
 * lists keys from the keys table, so an unlisted key is invisible to it and to `inspect`.
 */
import type { CassandraBackend } from '../../../persistence/cassandra';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import { cassandraScope, closeAll } from '../../support/servers';
import { recoverStates, startBackend } from './support';

const cassandra = cassandraScope('kft_late_unlisting');
const { keyspace } = cassandra;
const P = { topic: 'orders', partition: 0 };
const snap = (state: number, offset: number) => ({ state, offset });

/** Holds the backend's keys-table removals until `release()` (the pause of its engine). */
function pauseRemovals(backend: CassandraBackend<number, number>) {
  const keys = backend.keys!;
  const remove = keys.remove.bind(keys);
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  let reached!: () => void;
  const paused = new Promise<void>((resolve) => {
    reached = resolve;
  });
  keys.remove = async (partition, removed) => {
    reached();
    await released;
    return remove(partition, removed);
  };
  return { paused, release };
}

describe.each([
  ['a stale owner (an older generation)', 1, 2],
  ['an earlier engine of the same generation', 2, 2],
] as const)("fencing 'lwt': a late unlisting by %s", (_name, olderGeneration, newerGeneration) => {
  const table = `g${olderGeneration}${newerGeneration}`;
  const options = { tables: { snapshots: `snap_${table}`, keys: `keys_${table}` } } as const;
  let older: CassandraBackend<number, number>;
  let newer: CassandraBackend<number, number>;
  let reader: CassandraBackend<number, number>;

  beforeAll(async () => {
    older = await startBackend<number, number>(keyspace, options);
    newer = await startBackend<number, number>(keyspace, options);
    reader = await startBackend<number, number>(keyspace, options);
  });
  afterAll(async () => {
    await closeAll(
      () => older?.close(),
      () => newer?.close(),
      () => reader?.close(),
    );
  });

  test('leaves the key the newer engine stored again listed', async () => {
    const committer = new InMemoryOffsetCommitter();
    const old = await older.forPartition({ ...P, generation: olderGeneration, committer });
    // The key stored, then deleted (a marker at 20) by the older engine.
    await old.write({ writes: [{ key: 'k', snapshot: snap(1, 10), addKey: true }] });
    await old.write({ writes: [{ key: 'k', delete: { offset: 20 } }] });

    // The older engine's purge of its marker applies; its unlisting waits.
    const pause = pauseRemovals(older);
    const purging = old.write({ writes: [{ key: 'k', purge: { offset: 20 } }], commitOffset: 21 });
    await pause.paused;

    // The newer engine writes the key again (a record past the marker) and lists it.
    const owner = await newer.forPartition({ ...P, generation: newerGeneration, committer });
    const written = await owner.write({ writes: [{ key: 'k', snapshot: snap(7, 30), addKey: true }], commitOffset: 31 });
    expect(written.statuses).toEqual(['applied']);

    // Then the older engine's removal lands.
    pause.release();
    await purging;

    const recovered = await recoverStates(await reader.forPartition({ ...P, generation: newerGeneration + 1, committer: new InMemoryOffsetCommitter() }));
    expect(recovered.get('k')).toEqual({ state: 7, offset: 30, events: undefined });
  });

  test('leaves a key listed that the newer engine recovered as stored and the older one unlisted before the newer one wrote it again', async () => {
    const committer = new InMemoryOffsetCommitter();
    const old = await older.forPartition({ ...P, generation: olderGeneration, committer });
    await old.write({ writes: [{ key: 'r', snapshot: snap(1, 10), addKey: true }] });

    // The newer engine recovers the partition: 'r' is stored (listed, a value).
    const owner = await newer.forPartition({ ...P, generation: newerGeneration, committer });
    expect((await recoverStates(owner)).get('r')).toEqual({ state: 1, offset: 10, events: undefined });

    // The older engine, still persisting (a same-owner retry's previous engine, or a stale owner),
    // deletes 'r' and purges the marker once its offset is committed: the listing goes.
    await old.write({ writes: [{ key: 'r', delete: { offset: 20 } }] });
    await old.write({ writes: [{ key: 'r', purge: { offset: 20 } }], commitOffset: 21 });

    // The newer engine folds the delete and a record after it in one batch: a put of a key it
    // holds as stored (no listing asked for).
    const written = await owner.write({ writes: [{ key: 'r', snapshot: snap(7, 30) }], commitOffset: 31 });
    expect(written.statuses).toEqual(['applied']);

    const recovered = await recoverStates(await reader.forPartition({ ...P, generation: newerGeneration + 1, committer: new InMemoryOffsetCommitter() }));
    expect(recovered.get('r')).toEqual({ state: 7, offset: 30, events: undefined });
  });
});
