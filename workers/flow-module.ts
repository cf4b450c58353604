import path from 'node:path';
import { ConfigError } from '../config/errors';
import type { FlowDefinition } from '../define-flow';

/**
 * Loads a user's flow module (`.ts` or `.js`): its default export, or an export named `flow`,
 * must be what `defineFlow` returned.
 */
export function loadFlowModule(modulePath: string): FlowDefinition<unknown, unknown> {
  const resolved = path.resolve(modulePath);
  let mod: Record<string, unknown>;
  try {
    mod = require(resolved);
  } catch (err) {
    if ((err as { code?: string }).code === 'MODULE_NOT_FOUND' && String((err as Error).message).includes(resolved)) {
      throw new ConfigError(`flow module ${modulePath} not found (resolved to ${resolved})`);
    }
    throw err;
  }
  const candidates = [mod.default, mod.flow, (mod.default as Record<string, unknown> | undefined)?.default];
  const flow = candidates.find(isFlow);
  if (!flow) {
    throw new ConfigError(
      `${modulePath} does not export a flow: export default defineFlow({...}) (or export const flow = defineFlow({...}))`,
    );
  }
  return flow;
}

const isFlow = (v: unknown): v is FlowDefinition<unknown, unknown> =>
  typeof v === 'object' && v !== null && (v as { kind?: unknown }).kind === 'kafka-flow-temporal/flow';
