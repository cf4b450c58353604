/**
 * The group's partition assignor for flows with local state: sticky and state-aware, and the one
 * that places standby replicas (Kafka Streams' HighAvailabilityTaskAssignor, in small).
 *
 * Every member tells the leader, in its join metadata, which partitions it owned and how fresh its
 * local copy of each partition's state is (the snapshot-partition offset its local store's
 * checkpoint is at). The leader then
 * 1. balances: every member gets ⌊N/M⌋ or ⌈N/M⌉ partitions;
 * 2. keeps a partition with the member that owned it, within that share (its state is in memory:
 *    the runtime keeps it across the rebalance, nothing is restored) — a member over its share keeps
 *    first what it owns but does not fold yet (still recovering: it just came to it), and gives up
 *    what it folds, so no partition is moved on again before it folded where it went;
 * 3. gives every other partition to the member with the freshest local copy that has room (it
 *    restores only the records after its checkpoint), else to the least loaded;
 * 4. with standby replicas, picks for each partition that many other members to keep a warm copy,
 *    the freshest copies first, else the fewest standbys — sent to each member in its
 *    assignment's userData.
 * Members that do not speak this protocol make the group fall back to the next one both sides list
 * (kafkajs's round robin), so a rolling upgrade mixes them safely.
 *
 * Cooperative (`rebalance: 'cooperative'`, its own protocol name): the same plan, except that a
 * partition another member still reports owning goes to no one this round. That member gives it up
 * after the sync (the kafkajs patch's incremental revoke point) and rejoins; the next round, which
 * finds it unclaimed, hands it on. Partitions that stay with their owner are never revoked. A plan
 * that withholds anything announces the next round to every member (`followUp` in the assignment's
 * userData): they heartbeat every 100 ms until it begins (the kafkajs patch) instead of hearing of it a
 * heartbeat interval later, so that round completes as soon as the revoking members rejoin.
 */
import { AssignerProtocol, type Assignment, type GroupMember, type GroupMemberAssignment, type PartitionAssigner } from 'kafkajs';

export const STATE_ASSIGNOR = 'KafkaFlowStateAssigner';
export const COOPERATIVE_STATE_ASSIGNOR = 'KafkaFlowCooperativeAssigner';
const VERSION = 1;

/** What a member reports at each join. */
export interface MemberHints {
  /** The partitions it owned in its last generation, by topic. */
  readonly owned: Readonly<Record<string, readonly number[]>>;
  /** Per topic and partition: the snapshot-partition offset of its local copy's checkpoint (higher is fresher). */
  readonly fresh: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /**
   * Cooperative: the owned partitions it folds (recovered, engine installed); absent: all of them.
   * An owned partition not listed is still recovering.
   */
  readonly folding?: Readonly<Record<string, readonly number[]>>;
}

/** What the leader tells a member beyond its partitions. */
export interface MemberTasks {
  /** The partitions it keeps a standby copy of, by topic. */
  readonly standby: Record<string, number[]>;
  /** Cooperative: partitions were withheld this round (another member gives them up now): a next round follows at once. */
  readonly followUp?: boolean;
}

export interface PlannedMember {
  readonly memberId: string;
  readonly hints: MemberHints;
}

export interface Plan {
  readonly active: Map<string, Assignment>;
  readonly standby: Map<string, Record<string, number[]>>;
  /** Cooperative: how many partitions were withheld (another member still owns them); 0 otherwise. */
  readonly withheld: number;
}

const NO_HINTS: MemberHints = { owned: {}, fresh: {} };

/**
 * The assignment (pure: the adapter below feeds it kafkajs's members and partitions). Cooperative:
 * a partition planned for one member while another claims it is withheld (assigned to no one).
 */
export function planAssignment(
  members: readonly PlannedMember[],
  partitions: ReadonlyArray<{ topic: string; partition: number }>,
  standbyReplicas: number,
  cooperative = false,
): Plan {
  const sorted = [...members].sort((a, b) => (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0));
  const active = new Map<string, Assignment>(sorted.map((m) => [m.memberId, {}]));
  const standby = new Map<string, Record<string, number[]>>(sorted.map((m) => [m.memberId, {}]));
  if (sorted.length === 0) return { active, standby, withheld: 0 };
  const load = new Map<string, number>(sorted.map((m) => [m.memberId, 0]));
  const base = Math.floor(partitions.length / sorted.length);
  let extra = partitions.length % sorted.length;
  const ownerOf = new Map<string, string>();
  const key = (topic: string, partition: number) => `${topic}\u0000${partition}`;
  const freshness = (m: PlannedMember, topic: string, partition: number): bigint | undefined => {
    const at = m.hints.fresh[topic]?.[String(partition)];
    if (at === undefined || !/^\d+$/.test(at)) return undefined;
    return BigInt(at);
  };
  /** Room for one more: below the base share, or at it while ⌈N/M⌉ shares are left. */
  const room = (memberId: string) => load.get(memberId)! < base || (load.get(memberId)! === base && extra > 0);
  const give = (memberId: string, topic: string, partition: number) => {
    if (load.get(memberId)! === base) extra--;
    load.set(memberId, load.get(memberId)! + 1);
    ownerOf.set(key(topic, partition), memberId);
    add(active.get(memberId)!, topic, partition);
  };
  const exists = new Set(partitions.map((p) => key(p.topic, p.partition)));

  // 2. Sticky: a member keeps what it owned, within its share (claims to one partition by two
  // members — one of them stale — go to the fresher copy).
  const claims = new Map<string, PlannedMember[]>();
  for (const m of sorted) {
    for (const [topic, ps] of Object.entries(m.hints.owned)) {
      for (const partition of ps) {
        const k = key(topic, partition);
        if (!exists.has(k)) continue;
        const list = claims.get(k) ?? [];
        list.push(m);
        claims.set(k, list);
      }
    }
  }
  // Partitions an owner does not fold yet first: within its share it keeps those, and gives up
  // what it folds (moving a partition still recovering would add its new owner's recovery to the
  // time it has not folded since its last move).
  const recovering = (p: { topic: string; partition: number }) =>
    (claims.get(key(p.topic, p.partition)) ?? []).some((m) => m.hints.folding !== undefined && !(m.hints.folding[p.topic] ?? []).includes(p.partition));
  const stillRecovering = partitions.filter(recovering);
  const keptFirst = stillRecovering.length === 0 ? partitions : [...stillRecovering, ...partitions.filter((p) => !stillRecovering.includes(p))];
  for (const p of keptFirst) {
    const k = key(p.topic, p.partition);
    const claimants = claims.get(k);
    if (!claimants) continue;
    const best = [...claimants].sort((a, b) => compareFresh(freshness(b, p.topic, p.partition), freshness(a, p.topic, p.partition)))[0]!;
    if (room(best.memberId)) give(best.memberId, p.topic, p.partition);
  }
  // 3. The rest: the freshest local copy with room, else the least loaded.
  for (const p of partitions) {
    if (ownerOf.has(key(p.topic, p.partition))) continue;
    let pick: PlannedMember | undefined;
    for (const m of sorted) {
      if (!room(m.memberId)) continue;
      if (pick === undefined) {
        pick = m;
        continue;
      }
      const c = compareFresh(freshness(m, p.topic, p.partition), freshness(pick, p.topic, p.partition));
      if (c > 0 || (c === 0 && load.get(m.memberId)! < load.get(pick.memberId)!)) pick = m;
    }
    give(pick!.memberId, p.topic, p.partition);
  }
  // Cooperative: what another member still owns waits for its revoke (the next round hands it on).
  let withheld = 0;
  if (cooperative) {
    for (const p of partitions) {
      const k = key(p.topic, p.partition);
      const owner = ownerOf.get(k)!;
      if (!(claims.get(k) ?? []).some((m) => m.memberId !== owner)) continue;
      withheld++;
      const list = active.get(owner)![p.topic]!;
      list.splice(list.indexOf(p.partition), 1);
      if (list.length === 0) delete active.get(owner)![p.topic];
    }
  }
  // 4. Standbys: other members, freshest copies first, else the fewest standbys.
  const replicas = Math.min(standbyReplicas, sorted.length - 1);
  if (replicas > 0) {
    const standbys = new Map<string, number>(sorted.map((m) => [m.memberId, 0]));
    for (const p of partitions) {
      const owner = ownerOf.get(key(p.topic, p.partition));
      const candidates = sorted
        .filter((m) => m.memberId !== owner)
        .sort((a, b) => compareFresh(freshness(b, p.topic, p.partition), freshness(a, p.topic, p.partition)) || standbys.get(a.memberId)! - standbys.get(b.memberId)!);
      for (const m of candidates.slice(0, replicas)) {
        standbys.set(m.memberId, standbys.get(m.memberId)! + 1);
        add(standby.get(m.memberId)!, p.topic, p.partition);
      }
    }
  }
  return { active, standby, withheld };
}

function add(byTopic: Record<string, number[]>, topic: string, partition: number): void {
  const list = byTopic[topic];
  if (list) list.push(partition);
  else byTopic[topic] = [partition];
}

/** Fresher first: a copy beats none; a higher checkpoint beats a lower. */
function compareFresh(a: bigint | undefined, b: bigint | undefined): number {
  if (a === b) return 0;
  if (a === undefined) return -1;
  if (b === undefined) return 1;
  return a > b ? 1 : -1;
}

/** A member's hints from its join metadata's userData (anything unreadable: none). */
export function readHints(userData: Buffer | null | undefined): MemberHints {
  if (!userData || userData.length === 0) return NO_HINTS;
  try {
    const h = JSON.parse(userData.toString('utf8')) as Partial<MemberHints>;
    return {
      owned: isRecord(h.owned) ? (h.owned as MemberHints['owned']) : {},
      fresh: isRecord(h.fresh) ? (h.fresh as MemberHints['fresh']) : {},
      ...(isRecord(h.folding) ? { folding: h.folding as MemberHints['folding'] } : {}),
    };
  } catch {
    return NO_HINTS;
  }
}

/** The tasks the leader sent this member (its assignment's userData; anything unreadable: none). */
export function readTasks(userData: Buffer | null | undefined): MemberTasks {
  if (!userData || userData.length === 0) return { standby: {} };
  try {
    const t = JSON.parse(userData.toString('utf8')) as Partial<MemberTasks>;
    return { standby: isRecord(t.standby) ? (t.standby as MemberTasks['standby']) : {}, ...(t.followUp === true ? { followUp: true } : {}) };
  } catch {
    return { standby: {} };
  }
}

function isRecord(v: unknown): boolean {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The kafkajs assigner: `hints()` is asked at each join (what this member owns and how fresh its
 * local copies are), `standbyReplicas` is the leader's setting. Cooperative: the owned partitions
 * a member reports are the ones its consumer owns now (kafkajs passes them), and the plan
 * withholds what another member still owns.
 */
export function stateAssigner(hints: () => MemberHints, standbyReplicas: number, cooperative = false): PartitionAssigner {
  const name = cooperative ? COOPERATIVE_STATE_ASSIGNOR : STATE_ASSIGNOR;
  return ({ cluster }) => ({
    name,
    version: VERSION,
    cooperative,
    async assign({ members, topics }: { members: GroupMember[]; topics: string[] }): Promise<GroupMemberAssignment[]> {
      const planned = members.map((m) => ({ memberId: m.memberId, hints: readHints(AssignerProtocol.MemberMetadata.decode(m.memberMetadata)?.userData) }));
      const partitions = topics.flatMap((topic) => cluster.findTopicPartitionMetadata(topic).map((p) => ({ topic, partition: p.partitionId })));
      const plan = planAssignment(planned, partitions, standbyReplicas, cooperative);
      return planned.map(({ memberId }) => ({
        memberId,
        memberAssignment: AssignerProtocol.MemberAssignment.encode({
          version: VERSION,
          assignment: plan.active.get(memberId) ?? {},
          userData: Buffer.from(
            JSON.stringify({ standby: plan.standby.get(memberId) ?? {}, ...(plan.withheld > 0 ? { followUp: true } : {}) } satisfies MemberTasks),
          ),
        }),
      }));
    },
    followUp: (userData: Buffer | null) => cooperative && readTasks(userData).followUp === true,
    protocol({ topics, owned }: { topics: string[]; owned?: Array<{ topic: string; partitions: number[] }> }) {
      const h = hints();
      // Cooperative: the consumer's own partitions are what it owns; the runtime's (engines installed) are what it folds.
      const reported: MemberHints = cooperative
        ? { owned: Object.fromEntries((owned ?? []).map((o) => [o.topic, [...o.partitions]])), fresh: h.fresh, folding: h.owned }
        : h;
      return { name, metadata: AssignerProtocol.MemberMetadata.encode({ version: VERSION, topics, userData: Buffer.from(JSON.stringify(reported)) }) };
    },
  });
}
