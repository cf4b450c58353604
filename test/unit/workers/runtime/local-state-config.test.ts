// Which flows a worker can give a bounded state cache (FlowOptions.stateCache,
// KFT_STATE_CACHE_MAX_KEYS / _MAX_BYTES): transactional Kafka persistence with local state, key timers or not; the
// environment's bound overrides the flow's; anything else is a ConfigError saying what to change.
import { ConfigError } from '../../../../config/errors';
import { defineFlow, type FlowOptions } from '../../../../define-flow';
import { standbyReplicasOf, stateCacheOf } from '../../../../workers/runtime/local-state-config';

const base: FlowOptions<number, unknown> = { name: 'f', groupId: 'g', topics: ['t'], fold: (s) => (s ?? 0) + 1 };
const local = { ...base, persistence: { backend: 'kafka' as const, transactional: true, localState: { dir: '/state' } } };

test('none unless the flow or the environment sets one; the environment overrides the flow', () => {
  expect(stateCacheOf(defineFlow(local), {})).toBeUndefined();
  expect(stateCacheOf(defineFlow({ ...local, stateCache: { maxKeys: 500 } }), {})?.maxKeys).toBe(500);
  expect(stateCacheOf(defineFlow({ ...local, stateCache: { maxKeys: 500 } }), { stateCacheMaxKeys: 20 })?.maxKeys).toBe(20);
  // KFT_STATE_DIR turns local state on for a Kafka flow, transactional or caching.
  const kafka = defineFlow({ ...base, persistence: { backend: 'kafka', transactional: true } });
  expect(stateCacheOf(kafka, { stateCacheMaxKeys: 20, stateDir: '/state' })?.maxKeys).toBe(20);
  const caching = defineFlow({ ...base, persistence: { backend: 'kafka', transactional: false } });
  expect(stateCacheOf(caching, { stateCacheMaxKeys: 20, stateDir: '/state' })?.maxKeys).toBe(20);
});

test('a byte bound, alone or with a key bound; each from the environment overrides the flow\'s', () => {
  const both = stateCacheOf(defineFlow({ ...local, stateCache: { maxKeys: 500, maxBytes: 1 << 20 } }), { stateCacheMaxBytes: 4096 });
  expect([both?.maxKeys, both?.maxBytes]).toEqual([500, 4096]);
  const bytesOnly = stateCacheOf(defineFlow(local), { stateCacheMaxBytes: 1 << 20 });
  expect([bytesOnly?.maxKeys, bytesOnly?.maxBytes]).toEqual([Number.POSITIVE_INFINITY, 1 << 20]);
  expect(() => stateCacheOf(defineFlow(base), { stateCacheMaxBytes: 4096 })).toThrow(/KFT_STATE_CACHE_MAX_BYTES \(.*\) needs local state/);
});

test.each([
  ['without local state', { ...base, persistence: { backend: 'kafka' as const, transactional: true } }, /stateCache \(the keys out of memory are read from the local store\) needs local state: Kafka persistence/],
  ['on the memory backend', base, /stateCache \(.*\) needs local state/],
  ['on Cassandra', { ...base, persistence: { backend: 'cassandra' as const } }, /stateCache \(.*\) needs local state/],
])('a ConfigError %s', (_, options, message) => {
  const flow = defineFlow({ ...(options as FlowOptions<number, unknown>), stateCache: { maxKeys: 10 } });
  expect(() => stateCacheOf(flow, {})).toThrow(ConfigError);
  expect(() => stateCacheOf(flow, {})).toThrow(message);
});

test('with key timers (onTimer, stateTtl): the store finds the timers of keys out of memory', () => {
  expect(stateCacheOf(defineFlow({ ...local, stateTtl: '1h', stateCache: { maxKeys: 10 } }), {})?.maxKeys).toBe(10);
  expect(stateCacheOf(defineFlow({ ...local, onTimer: (s: number) => s, stateCache: { maxKeys: 10 } }), {})?.maxKeys).toBe(10);
});

test('the environment variable is named when it is the one set', () => {
  expect(() => stateCacheOf(defineFlow(base), { stateCacheMaxKeys: 10 })).toThrow(/KFT_STATE_CACHE_MAX_KEYS \(.*\) needs local state/);
  expect(() => standbyReplicasOf(defineFlow(base), { standbyReplicas: 1 })).toThrow(/KFT_STANDBY_REPLICAS \(.*\) needs local state/);
});

test('standby replicas: none unless set, the environment overriding the flow; only with local state', () => {
  expect(standbyReplicasOf(defineFlow(base), {})).toBe(0);
  expect(standbyReplicasOf(defineFlow(local), {})).toBe(0);
  expect(standbyReplicasOf(defineFlow({ ...local, standbyReplicas: 1 }), {})).toBe(1);
  expect(standbyReplicasOf(defineFlow({ ...local, standbyReplicas: 1 }), { standbyReplicas: 2 })).toBe(2);
  expect(standbyReplicasOf(defineFlow({ ...local, standbyReplicas: 1 }), { standbyReplicas: 0 })).toBe(0);
  expect(() => standbyReplicasOf(defineFlow({ ...base, standbyReplicas: 1 }), {})).toThrow(/standbyReplicas \(a standby copy is kept in the local store\) needs local state/);
});

test('Cassandra keeps local state in mode snapshots with a generation fence and no snapshot TTL: the cache works there, standby replicas do not', () => {
  const cassandra = defineFlow({ ...base, persistence: { backend: 'cassandra', localState: { dir: '/state' } }, stateCache: { maxKeys: 10 } });
  expect(stateCacheOf(cassandra, {})?.maxKeys).toBe(10);
  // KFT_STATE_DIR turns it on for a Cassandra flow that can keep it.
  expect(stateCacheOf(defineFlow({ ...base, persistence: { backend: 'cassandra' }, stateCache: { maxKeys: 10 } }), { stateDir: '/state' })?.maxKeys).toBe(10);
  expect(() => standbyReplicasOf(defineFlow({ ...base, persistence: { backend: 'cassandra', localState: { dir: '/state' } }, standbyReplicas: 1 }), {})).toThrow(
    /standbyReplicas .* tails the snapshot topic: it needs Kafka persistence/,
  );
  // KFT_STATE_DIR does not turn it on where it cannot be kept: the cache is refused.
  for (const persistence of [
    { backend: 'cassandra' as const, fencing: 'none' as const },
    { backend: 'cassandra' as const, mode: 'journal' as const },
    { backend: 'cassandra' as const, ttl: { snapshots: '1d' } },
  ]) {
    expect(() => stateCacheOf(defineFlow({ ...base, persistence, stateCache: { maxKeys: 10 } }), { stateDir: '/state' })).toThrow(ConfigError);
  }
});

test.each([
  [{ fencing: 'none' as const }, /persistence.localState: local state needs a generation fence: fencing 'lwt' or 'timestamp', not 'none'/],
  [{ mode: 'journal' as const }, /persistence.localState: local state keeps snapshots: mode 'journal' is not 'snapshots'/],
  [{ ttl: { snapshots: '7d' } }, /persistence.localState: local state cannot follow a snapshot TTL/],
])('persistence.localState on Cassandra that cannot keep it (%j) is a ConfigError at defineFlow', (options, message) => {
  expect(() => defineFlow({ ...base, persistence: { backend: 'cassandra' as const, localState: { dir: '/state' }, ...options } as FlowOptions<number, unknown>['persistence'] })).toThrow(message);
});
