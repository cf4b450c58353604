/** The real KeySources: Kafka's metadata, the partition workflow's status query, the owner's HTTP port, the persisted snapshot. */
import type { Client } from '@temporalio/client';
import type { Owner } from '../../activities/types';
import type { FlowDefinition } from '../../define-flow';
import type { KafkaAdmin } from '../../kafka/admin';
import { partitionWorkflowId, statusQuery } from '../../workflows/partition-workflow';
import { queryErrorText } from '../cli/flow-status';
import { inspectFlow } from '../cli/inspect';
import type { KeySources, OwnerKeyAnswer, OwnerLookup } from './key-query';

/** How long the status query and the owner each get to answer. */
const ASK_TIMEOUT_MS = 5_000;
/** How long a topic's partition count is trusted (partitions are added, rarely). */
const PARTITIONS_TTL_MS = 30_000;

export interface KeySourceClients {
  readonly definition: FlowDefinition<unknown, unknown>;
  readonly temporal: Client;
  readonly admin: KafkaAdmin;
  /** This worker, when it asks: the owner it is answers itself, not over HTTP. */
  readonly self?: {
    readonly httpAddress: string;
    answer(topic: string, partition: number, key: string): Promise<OwnerKeyAnswer | undefined>;
  };
}

/** The path a live state query of `key` asks its owner at: `?local=1` answers from that process only (never forwarded on). */
export function ownerKeyPath(flow: string, topic: string, partition: number, key: string): string {
  const query = new URLSearchParams({ topic, partition: String(partition), local: '1' });
  return `/flows/${encodeURIComponent(flow)}/keys/${encodeURIComponent(key)}?${query}`;
}

export function keySources(c: KeySourceClients): KeySources {
  const counts = new Map<string, { at: number; count: Promise<number | undefined> }>();
  return {
    partitionCount(topic) {
      const cached = counts.get(topic);
      if (cached && Date.now() - cached.at < PARTITIONS_TTL_MS) return cached.count;
      const count = c.admin.describeTopic(topic).then((d) => d?.partitions);
      counts.set(topic, { at: Date.now(), count });
      count.catch(() => counts.delete(topic));
      return count;
    },

    async ownerOf(topic, partition): Promise<OwnerLookup> {
      const handle = c.temporal.workflow.getHandle(partitionWorkflowId({ flow: c.definition.name, topic, partition }));
      try {
        const status = await c.temporal.connection.withDeadline(Date.now() + ASK_TIMEOUT_MS, () => handle.query(statusQuery));
        if (status.phase === 'running' && status.owner) return { owner: status.owner };
        return { none: `the partition is ${status.phase}` };
      } catch (err) {
        if ((err as { name?: string }).name === 'WorkflowNotFoundError') return { none: 'the partition has no workflow (no worker has owned it)' };
        return { none: `no worker answered the partition workflow's status query: ${queryErrorText(err)}` };
      }
    },

    async askOwner(owner: Owner, topic, partition, key) {
      if (c.self && owner.httpAddress === c.self.httpAddress) return c.self.answer(topic, partition, key);
      const res = await fetch(`${owner.httpAddress}${ownerKeyPath(c.definition.name, topic, partition, key)}`, { signal: AbortSignal.timeout(ASK_TIMEOUT_MS) });
      if (res.status === 404) {
        const body = (await res.json().catch(() => ({}))) as { error?: string };
        if (body.error === 'KeyNotFoundError') return undefined;
      }
      if (res.status !== 200) {
        const body = (await res.json().catch(() => ({}))) as { error?: string; message?: string };
        throw new Error(`HTTP ${res.status}${body.error ? ` ${body.error}: ${body.message}` : ''}`);
      }
      return (await res.json()) as OwnerKeyAnswer;
    },

    async snapshot(topic, partition, key) {
      for await (const k of inspectFlow(c.definition, { topic, partition, key })) return { offset: k.offset, state: k.state };
      return undefined;
    },
  };
}
