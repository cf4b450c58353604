/**
 * The driving consumer's group membership: generation id and member id as of its last join,
 * from the (patched) GROUP_JOIN event. Read it live at each transaction: a cached generation is
 * a stale generation after the next rebalance.
 */
import type { Consumer } from 'kafkajs';
import { InternalError } from '../config/errors';
import { readTasks } from './state-assignor';

export interface GroupGeneration {
  groupId: string;
  generationId: number;
  memberId: string;
  /** The partitions this member was assigned under this generation, by topic. */
  assignment: Record<string, number[]>;
  /** The partitions it keeps standby copies of (the state assignor's tasks), by topic; empty otherwise. */
  standby?: Record<string, number[]>;
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
      };
      if (typeof generation.generationId !== 'number') {
        throw new InternalError('GROUP_JOIN without generationId: is the kafkajs patch applied? (npm install runs patch-package)');
      }
      this.latest = generation;
      for (const listener of this.listeners) listener(generation);
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
