import { ManualClock } from '../../../flow/clock';
import { KeyFlow } from '../../../flow/key-flow';
import { PartitionKeys } from '../../../flow/partition-keys';
import { PendingOutputs } from '../../../flow/pending-outputs';
import type { OutputRecord } from '../../../flow/poison';

const output: OutputRecord = { kind: 'emitted', topic: 'out', key: 'k', value: 'v' };

function key(keys: PartitionKeys<number, number>, name: string, holding: number | undefined): KeyFlow<number, number> {
  const kf = new KeyFlow<number, number>(name, 0, holding ?? 0, false);
  kf.holding = holding;
  keys.live.set(name, kf);
  return kf;
}

describe('PartitionKeys (the keys in memory the fold and the persists share)', () => {
  test('committable: the smallest held offset, or the position when no key holds', () => {
    const keys = new PartitionKeys<number, number>(1000);
    expect(keys.committable(42)).toBe(42);
    key(keys, 'a', 7);
    key(keys, 'b', undefined);
    key(keys, 'c', 3);
    expect(keys.committable(42)).toBe(3);
  });

  test('markPersisted holds from the given offset, its clock relative to the epoch; evict forgets a key, remembering it if stored', () => {
    const keys = new PartitionKeys<number, number>(1000);
    const a = key(keys, 'a', 5);
    keys.markPersisted(a, 1250, 9);
    expect(a.holding).toBe(9);
    expect(a.flushedClock).toBe(250);
    a.stored = true;
    keys.evict(a);
    expect(keys.live.has('a')).toBe(false);
    expect(keys.unloaded.has('a')).toBe(true);
    expect(a.holding).toBeUndefined();
    const b = key(keys, 'b', 6);
    keys.evict(b);
    expect(keys.unloaded.has('b')).toBe(false);
  });
});

describe('PendingOutputs (outputs not landed yet, and when an outputs persist is due)', () => {
  test('due outputEvery after the first output, and again from the end of a persist that left some pending', () => {
    const clock = new ManualClock(100);
    const pending = new PendingOutputs(clock, 1000, undefined);
    expect(pending.due(5000)).toBe(false);
    pending.added(2);
    clock.set(600);
    pending.added(1); // the oldest counts
    expect(pending.held).toBe(3);
    expect(pending.due(1099)).toBe(false);
    expect(pending.due(1100)).toBe(true);
    const keys = new PartitionKeys<number, number>(0);
    const kf = key(keys, 'k', 0);
    kf.addOutputs([output]);
    pending.landed(2);
    pending.afterWrites(2000, keys.live.values()); // one key still has outputs: due again from 2000
    expect(pending.due(2999)).toBe(false);
    expect(pending.due(3000)).toBe(true);
    kf.outputs = undefined;
    pending.afterWrites(3000, keys.live.values());
    expect(pending.due(1e9)).toBe(false);
  });

  test('maxPendingOutputs: due at half of it, full at it', () => {
    const pending = new PendingOutputs(new ManualClock(0), 60_000, 10);
    pending.added(4);
    expect(pending.due(0)).toBe(false);
    pending.added(1);
    expect(pending.due(0)).toBe(true);
    expect(pending.full()).toBe(false);
    pending.added(5);
    expect(pending.full()).toBe(true);
    pending.landed(1);
    expect(pending.full()).toBe(false);
  });
});
