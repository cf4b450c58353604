import { ConfigError } from '../../config/errors';
import type { FlowDefinition } from '../../define-flow';
import { brokersFromEnv } from '../../config/env';
import { readKafkaSecurity } from '../../config/security';
import type { InspectedKey, InspectFilter } from '../../persistence/descriptor';
import { findDescriptor } from '../../persistence/descriptors';

export type { InspectedKey, InspectFilter };

/** Reads a flow's persisted state from whichever backend it uses, without joining its group. */
export async function* inspectFlow(definition: FlowDefinition<unknown, unknown>, filter: InspectFilter = {}): AsyncIterable<InspectedKey> {
  const p = definition.persistence;
  if (p.mode === 'none') throw new ConfigError(`flow "${definition.name}" is transient (mode 'none'): it persists nothing`);
  const descriptor = findDescriptor(p.backend);
  if (!descriptor) throw new ConfigError(`inspect does not support the ${p.backend} backend`);
  // Read when the backend asks for it: the memory backend refuses before KAFKA_BROKERS is parsed.
  yield* descriptor.inspect(definition, filter, () => ({ brokers: brokersFromEnv(), kafkaSecurity: readKafkaSecurity() }));
}
