// The state-aware assignor's plan (kafka/state-assignor.ts): balanced shares, partitions kept with
// their owners, the rest to the freshest local copy, standbys on other members — and the join
// metadata it reads (anything unreadable counts as no hints).
import { AssignerProtocol } from 'kafkajs';
import { type MemberHints, planAssignment, readHints, readTasks, stateAssigner } from '../../../kafka/state-assignor';

const T = 'in';
const parts = (n: number, topic = T) => Array.from({ length: n }, (_, partition) => ({ topic, partition }));
const member = (memberId: string, owned: number[] = [], fresh: Record<number, number> = {}) => ({
  memberId,
  hints: { owned: owned.length ? { [T]: owned } : {}, fresh: { [T]: Object.fromEntries(Object.entries(fresh).map(([p, o]) => [p, String(o)])) } } as MemberHints,
});
const sorted = (a: number[] | undefined) => [...(a ?? [])].sort((x, y) => x - y);

test('no hints: every member gets ⌊N/M⌋ or ⌈N/M⌉, every partition exactly once', () => {
  const plan = planAssignment([member('b'), member('a'), member('c')], parts(8), 0);
  const counts = [...plan.active.values()].map((a) => (a[T] ?? []).length).sort();
  expect(counts).toEqual([2, 3, 3]);
  expect(sorted([...plan.active.values()].flatMap((a) => a[T] ?? []))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
});

test('a member joining takes only what the others must give up; the rest stay with their owners', () => {
  const plan = planAssignment([member('a', [0, 1, 2]), member('b', [3, 4, 5]), member('c')], parts(6), 0);
  const a = sorted(plan.active.get('a')![T]);
  const b = sorted(plan.active.get('b')![T]);
  expect(a).toHaveLength(2);
  expect(b).toHaveLength(2);
  for (const p of a) expect([0, 1, 2]).toContain(p);
  for (const p of b) expect([3, 4, 5]).toContain(p);
  expect(sorted(plan.active.get('c')![T])).toHaveLength(2);
});

test('a member leaving: its partitions go to the member with the freshest local copy of each', () => {
  // b owned 2 and 3; it is gone. a has a copy of 3 at offset 900, c of 2 at 500 and of 3 at 100.
  const plan = planAssignment([member('a', [0], { 3: 900 }), member('c', [1], { 2: 500, 3: 100 })], parts(4), 0);
  expect(sorted(plan.active.get('a')![T])).toEqual([0, 3]);
  expect(sorted(plan.active.get('c')![T])).toEqual([1, 2]);
});

test('two members claiming one partition (one of them stale): the fresher copy keeps it', () => {
  const plan = planAssignment([member('a', [0], { 0: 10 }), member('b', [0], { 0: 70 })], parts(2), 0);
  expect(plan.active.get('b')![T]).toContain(0);
  expect(plan.active.get('a')![T]).toEqual([1]);
});

test('standbys: never the owner, the freshest copy first, spread otherwise; capped by the other members', () => {
  const two = planAssignment([member('a'), member('b')], parts(4), 1);
  for (const [m, other] of [['a', 'b'], ['b', 'a']] as const) expect(sorted(two.standby.get(m)![T])).toEqual(sorted(two.active.get(other)![T]));
  const three = planAssignment([member('a', [0, 1]), member('b', [2, 3]), member('c', [], { 0: 50 })], parts(6), 1);
  expect(three.standby.get('c')![T]).toContain(0);
  for (const [m, tasks] of three.standby) for (const p of tasks[T] ?? []) expect(three.active.get(m)![T] ?? []).not.toContain(p);
  const counts = [...three.standby.values()].map((s) => (s[T] ?? []).length);
  expect(counts.reduce((x, y) => x + y, 0)).toBe(6);
  expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(2);
  const alone = planAssignment([member('a')], parts(3), 2);
  expect(alone.standby.get('a')).toEqual({});
});

test('unreadable hints or tasks count as none', () => {
  expect(readHints(Buffer.from('not json'))).toEqual({ owned: {}, fresh: {} });
  expect(readHints(null)).toEqual({ owned: {}, fresh: {} });
  expect(readHints(Buffer.from('{"owned":[1],"fresh":"x"}'))).toEqual({ owned: {}, fresh: {} });
  expect(readTasks(Buffer.from('{'))).toEqual({ standby: {} });
  expect(readTasks(Buffer.from('{"standby":{"in":[1]}}'))).toEqual({ standby: { in: [1] } });
});

test('the kafkajs adapter: hints travel in the join metadata, standbys in the assignment userData', async () => {
  const cluster = { findTopicPartitionMetadata: () => [0, 1, 2, 3].map((partitionId) => ({ partitionId })) };
  const mine = stateAssigner(() => ({ owned: { [T]: [1, 2] }, fresh: {} }), 1)({ cluster } as never);
  const theirs = stateAssigner(() => ({ owned: { [T]: [0, 3] }, fresh: {} }), 1)({ cluster } as never);
  const members = [
    { memberId: 'm1', memberMetadata: mine.protocol({ topics: [T] }).metadata },
    { memberId: 'm2', memberMetadata: theirs.protocol({ topics: [T] }).metadata },
  ];
  const out = await mine.assign({ members, topics: [T] });
  const decoded = new Map(out.map((o) => [o.memberId, AssignerProtocol.MemberAssignment.decode(o.memberAssignment)!]));
  expect(sorted(decoded.get('m1')!.assignment[T])).toEqual([1, 2]);
  expect(sorted(decoded.get('m2')!.assignment[T])).toEqual([0, 3]);
  expect(sorted(readTasks(decoded.get('m1')!.userData).standby[T])).toEqual([0, 3]);
});

describe('cooperative', () => {
  const owners = (plan: ReturnType<typeof planAssignment>) => {
    const out = new Map<number, string>();
    for (const [m, a] of plan.active) for (const p of a[T] ?? []) out.set(p, m);
    return out;
  };

  test('a member joining: what moves goes to no one this round, to the new member the next; nothing that stays moves', () => {
    // a and b own six partitions; c joins. Round 1: c is planned two, both still owned: withheld.
    const first = planAssignment([member('a', [0, 1, 2]), member('b', [3, 4, 5]), member('c')], parts(6), 0, true);
    expect(first.withheld).toBe(2);
    const firstOwners = owners(first);
    expect(first.active.get('c')).toEqual({});
    for (const [p, m] of firstOwners) expect(m).toBe(p <= 2 ? 'a' : 'b');
    const given = [0, 1, 2, 3, 4, 5].filter((p) => !firstOwners.has(p));
    expect(given).toHaveLength(2);
    // a and b gave those up and rejoin reporting what they kept: round 2 hands them to c.
    const kept = (m: string) => sorted(first.active.get(m)![T]);
    const second = planAssignment([member('a', kept('a')), member('b', kept('b')), member('c')], parts(6), 0, true);
    expect(sorted(second.active.get('c')![T])).toEqual(given);
    expect(second.withheld).toBe(0);
    expect(sorted(second.active.get('a')![T])).toEqual(kept('a'));
    expect(sorted(second.active.get('b')![T])).toEqual(kept('b'));
  });

  test('a member over its share keeps first what it does not fold yet: a partition that just moved is not moved on before it folded', () => {
    // d folds 0-3 and still recovers 4-7 (taken over from a member that left); e joins (a rolling restart).
    const d = { memberId: 'd', hints: { owned: { [T]: [0, 1, 2, 3, 4, 5, 6, 7] }, fresh: {}, folding: { [T]: [0, 1, 2, 3] } } as MemberHints };
    const first = planAssignment([d, member('e')], parts(8), 0, true);
    expect(sorted(first.active.get('d')![T])).toEqual([4, 5, 6, 7]);
    expect(first.withheld).toBe(4); // 0-3 go to e in the next round
    // Without the folding hint (a member of an older version): the first ones by number stay.
    const old = planAssignment([member('d', [0, 1, 2, 3, 4, 5, 6, 7]), member('e')], parts(8), 0, true);
    expect(sorted(old.active.get('d')![T])).toEqual([0, 1, 2, 3]);
  });

  test('a member gone (left or evicted): its partitions are unclaimed and move in one round', () => {
    const plan = planAssignment([member('a', [0, 1]), member('c', [4, 5])], parts(6), 0, true);
    expect(sorted([...owners(plan).keys()])).toEqual([0, 1, 2, 3, 4, 5]);
    expect(sorted(plan.active.get('a')![T])).toEqual(expect.arrayContaining([0, 1]));
    expect(sorted(plan.active.get('c')![T])).toEqual(expect.arrayContaining([4, 5]));
  });

  test('a partition two members claim goes to neither this round (both give it up)', () => {
    const plan = planAssignment([member('a', [0], { 0: 10 }), member('b', [0], { 0: 70 })], parts(2), 0, true);
    expect(owners(plan).has(0)).toBe(false);
    expect(owners(plan).get(1)).toBe('a');
  });

  test('eager (the default) plans the same assignment with nothing withheld', () => {
    const eager = planAssignment([member('a', [0, 1, 2]), member('b', [3, 4, 5]), member('c')], parts(6), 0);
    expect(owners(eager).size).toBe(6);
  });

  test('the kafkajs adapter: its own protocol name, marked cooperative, reporting what kafkajs says the member owns', async () => {
    const cluster = { findTopicPartitionMetadata: () => [0, 1, 2, 3].map((partitionId) => ({ partitionId })) };
    // hints().owned is the runtime's (engines kept): the cooperative protocol reports the consumer's own instead.
    const hints = () => ({ owned: { [T]: [0, 1, 2, 3] }, fresh: {} });
    const a = stateAssigner(hints, 0, true)({ cluster } as never);
    const b = stateAssigner(hints, 0, true)({ cluster } as never);
    expect(a.name).toBe('KafkaFlowCooperativeAssigner');
    expect(a.cooperative).toBe(true);
    expect(stateAssigner(hints, 0)({ cluster } as never).cooperative).toBe(false);
    // what kafkajs says it owns is `owned`; what the runtime folds (its engines) is `folding`
    expect(readHints(AssignerProtocol.MemberMetadata.decode(a.protocol({ topics: [T], owned: [{ topic: T, partitions: [0, 1, 2, 3, 5] }] }).metadata)!.userData)).toEqual({
      owned: { [T]: [0, 1, 2, 3, 5] },
      fresh: {},
      folding: { [T]: [0, 1, 2, 3] },
    });
    const members = [
      { memberId: 'm1', memberMetadata: a.protocol({ topics: [T], owned: [{ topic: T, partitions: [0, 1, 2, 3] }] }).metadata },
      { memberId: 'm2', memberMetadata: b.protocol({ topics: [T], owned: [] }).metadata },
    ];
    const out = await a.assign({ members, topics: [T] });
    const decoded = new Map(out.map((o) => [o.memberId, AssignerProtocol.MemberAssignment.decode(o.memberAssignment)!]));
    expect(sorted(decoded.get('m1')!.assignment[T])).toHaveLength(2);
    expect(decoded.get('m2')!.assignment[T] ?? []).toEqual([]);
    // partitions were withheld: every member hears of the next round, and joins again at once
    for (const m of ['m1', 'm2']) expect(a.followUp!(decoded.get(m)!.userData)).toBe(true);
    // the next round withholds nothing: no member is sent on
    const next = await a.assign({
      members: [
        { memberId: 'm1', memberMetadata: a.protocol({ topics: [T], owned: [{ topic: T, partitions: sorted(decoded.get('m1')!.assignment[T]) }] }).metadata },
        { memberId: 'm2', memberMetadata: b.protocol({ topics: [T], owned: [] }).metadata },
      ],
      topics: [T],
    });
    for (const o of next) expect(a.followUp!(AssignerProtocol.MemberAssignment.decode(o.memberAssignment)!.userData)).toBe(false);
    // an eager assigner never announces one
    expect(stateAssigner(hints, 0)({ cluster } as never).followUp!(Buffer.from('{"standby":{},"followUp":true}'))).toBe(false);
  });
});
