/**
 * The driving consumer's group membership: generation id and member id as of its last join,
 * from the (patched) GROUP_JOIN event. Read it live at each transaction: a cached generation is
 * a stale generation after the next rebalance.
 */
import type { Consumer } from 'kafkajs';
import { InternalError } from '../config/errors';
import { COOPERATIVE_STATE_ASSIGNOR, readTasks } from './state-assignor';

export interface GroupGeneration {
  groupId: string;
  generationId: number;
  memberId: string;
  /** The partitions this member was assigned under this generation, by topic. */
  assignment: Record<string, number[]>;
  /** The partitions it keeps standby copies of (the state assignor's tasks), by topic; empty otherwise. */
  standby?: Record<string, number[]>;
  /** The group revokes incrementally (cooperative): a partition kept through a join keeps its ownership generation. */
  cooperative?: boolean;
  /** Cooperative: the partitions it owned and gives up now (its revoke point follows the join), by topic. */
  revoking?: Record<string, number[]>;
  /**
   * Cooperative: for a partition held since an earlier join of the same member (kept through the
   * rebalances between), that join's generation, by `topic\u0000partition`. Absent: since this one.
   */
  heldSince?: ReadonlyMap<string, number>;
}

const tpKey = (topic: string, partition: number) => `${topic}\u0000${partition}`;

/**
 * The generation since which `g`'s member has held the partition without a break — the one its
 * partition workflow and activities know it by — or undefined when `g` does not give it (a
 * partition being revoked still counts: its flush commits under `g`).
 */
export function ownershipGeneration(g: GroupGeneration | undefined, topic: string, partition: number): number | undefined {
  if (!g) return undefined;
  const assigned = (g.assignment[topic] ?? []).includes(partition) || (g.revoking?.[topic] ?? []).includes(partition);
  if (!assigned) return undefined;
  return g.heldSince?.get(tpKey(topic, partition)) ?? g.generationId;
}

/** The partitions `g` gives its member that an earlier join of it had not (each new to it), by topic. */
export function newlyAssigned(g: GroupGeneration): Record<string, number[]> {
  if (!g.heldSince || g.heldSince.size === 0) return g.assignment;
  const out: Record<string, number[]> = {};
  for (const [topic, partitions] of Object.entries(g.assignment)) {
    const fresh = partitions.filter((p) => !g.heldSince!.has(tpKey(topic, p)));
    if (fresh.length > 0) out[topic] = fresh;
  }
  return out;
}

/**
 * Cooperative joins of one member carry their partitions' ownership generations forward (`g` as
 * the member sees it after `previous`). Only from a cooperative join: after an eager one (the group
 * turning cooperative once its last eager-only member left) the member gave up everything before
 * it joined again, so nothing was kept through it.
 */
export function withHeldSince(g: GroupGeneration, previous: GroupGeneration | undefined): GroupGeneration {
  if (!g.cooperative || !previous?.cooperative || previous.memberId !== g.memberId) return g;
  const heldSince = new Map<string, number>();
  for (const byTopic of [g.assignment, g.revoking ?? {}]) {
    for (const [topic, partitions] of Object.entries(byTopic)) {
      for (const partition of partitions) {
        const since = ownershipGeneration(previous, topic, partition);
        if (since !== undefined && (previous.assignment[topic] ?? []).includes(partition)) heldSince.set(tpKey(topic, partition), since);
      }
    }
  }
  return { ...g, heldSince };
}

export class GroupMembership {
  private latest: GroupGeneration | undefined;
  private readonly listeners = new Set<(g: GroupGeneration) => void>();

  /** Starts tracking `consumer`'s joins; returns the function that stops it. */
  attach(consumer: Consumer): () => void {
    return consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
      const generation: GroupGeneration = {
        groupId: payload.groupId,
        generationId: payload.generationId,
        memberId: payload.memberId,
        assignment: Object.fromEntries(
          Object.entries(payload.memberAssignment).map(([topic, partitions]) => [topic, [...partitions]]),
        ),
        standby: readTasks(payload.memberUserData).standby,
        cooperative: payload.groupProtocol === COOPERATIVE_STATE_ASSIGNOR,
        revoking: Object.fromEntries((payload.revoking ?? []).map(({ topic, partitions }) => [topic, [...partitions]])),
      };
      if (typeof generation.generationId !== 'number') {
        throw new InternalError('GROUP_JOIN without generationId: is the kafkajs patch applied? (npm install runs patch-package)');
      }
      const joined = withHeldSince(generation, this.latest);
      this.latest = joined;
      for (const listener of this.listeners) listener(joined);
    });
  }

  /** The generation of the last join, or undefined before the first. */
  current(): GroupGeneration | undefined {
    return this.latest;
  }

  /** Calls `listener` on every join; returns the unsubscribe function. */
  onJoin(listener: (g: GroupGeneration) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves at the first join with a generation above `after` (default: any), or rejects at the deadline. */
  waitForJoin(timeoutMs: number, after = Number.NEGATIVE_INFINITY): Promise<GroupGeneration> {
    const now = this.latest;
    if (now && now.generationId > after) return Promise.resolve(now);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        unsubscribe();
        reject(new Error(`no group join (generation > ${after}) within ${timeoutMs} ms`));
      }, timeoutMs);
      const unsubscribe = this.onJoin((g) => {
        if (g.generationId <= after) return;
        clearTimeout(timer);
        unsubscribe();
        resolve(g);
      });
    });
  }
}
