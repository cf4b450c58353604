import path from 'node:path';
import { ConfigError } from '../../config/errors';
import type { FlowDefinition } from '../../define-flow';

/**
 * Loads a user's flow module (`.ts` or `.js`): its default export, or an export named `flow`,
 * must be what `defineFlow` returned.
 */
export function loadFlowModule(modulePath: string): FlowDefinition<unknown, unknown> {
  const resolved = path.resolve(modulePath);
  if (/\.(mts|cts|tsx)$/.test(resolved)) registerTsx();
  try {
    require.resolve(resolved);
  } catch {
    // Only the module itself: a module it imports that is missing is that module's error, below.
    throw new ConfigError(`flow module ${modulePath} not found (resolved to ${resolved})`);
  }
  let mod: Record<string, unknown>;
  try {
    mod = require(resolved);
  } catch (err) {
    if (!needsTsx(err) || !registerTsx()) throw err;
    mod = require(resolved);
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

let tsxRegistered = false;

/**
 * The CLI compiles `.ts` files itself (bin/ts-loader.js: fast, TypeScript syntax only). What only
 * tsx does — `require` of an ESM-only package, `import './x.js'` meaning `./x.ts`, ESM syntax in a
 * `.js` file, `.mts`/`.cts`/`.tsx` — needs tsx's hooks: registered on demand, once. Returns false
 * when they were registered already (the error is the module's own).
 */
function registerTsx(): boolean {
  if (tsxRegistered) return false;
  tsxRegistered = true;
  require('tsx/cjs');
  return true;
}

/** A load failure that tsx's hooks may cure (see registerTsx). */
function needsTsx(err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code;
  if (code === 'ERR_REQUIRE_ESM' || code === 'ERR_REQUIRE_ASYNC_MODULE' || code === 'MODULE_NOT_FOUND') return true;
  return err instanceof SyntaxError && /\b(import|export)\b/.test(err.message);
}

const isFlow = (v: unknown): v is FlowDefinition<unknown, unknown> =>
  typeof v === 'object' && v !== null && (v as { kind?: unknown }).kind === 'kafka-flow-temporal/flow';
