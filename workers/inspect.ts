import { ConfigError } from '../config/errors';
import type { FlowDefinition } from '../flow/define-flow';
import { kafkaFlowBackend } from './backends';

/** A persisted key as `inspect` prints it: one JSON line each. */
export interface InspectedKey {
  topic: string;
  partition: number;
  key: string;
  offset: string;
  state: unknown;
}

export interface InspectFilter {
  topic?: string;
  partition?: number;
  key?: string;
}

/** Reads a flow's persisted state from whichever backend it uses, without joining its group. */
export async function* inspectFlow(definition: FlowDefinition<unknown, unknown>, filter: InspectFilter = {}): AsyncIterable<InspectedKey> {
  const p = definition.persistence;
  if (p.mode === 'none') throw new ConfigError(`flow "${definition.name}" is transient (mode 'none'): it persists nothing`);
  if (p.backend === 'kafka') {
    const backend = kafkaFlowBackend(definition);
    try {
      for await (const s of backend.readAll({ topic: filter.topic, partition: filter.partition })) {
        if (filter.key !== undefined && s.key !== filter.key) continue;
        yield { topic: s.topic, partition: s.partition, key: s.key, offset: s.offset, state: s.state };
      }
    } finally {
      await backend.close();
    }
    return;
  }
  if (p.backend === 'memory') {
    throw new ConfigError(`flow "${definition.name}" uses the memory backend: its state lives inside each worker process and cannot be inspected`);
  }
  throw new ConfigError(`inspect does not support the ${p.backend} backend yet`);
}

