/**
 * The worker's bounded state cache (FlowOptions.stateCache, KFT_STATE_CACHE_MAX_KEYS), checked
 * before anything connects: it needs a backend that reads keys from a local store on demand —
 * transactional Kafka persistence with local state — and keys whose timers a restart does not
 * have to find (no onTimer, no stateTtl: a restart reads no key, so it would not see their timers).
 */
import { ConfigError } from '../../config/errors';
import type { FlowDefinition } from '../../define-flow';
import { StateCache } from '../../flow/state-cache';

export function stateCacheOf<S, V>(definition: FlowDefinition<S, V>, env: { stateCacheMaxKeys?: number; stateDir?: string }): StateCache | undefined {
  const maxKeys = env.stateCacheMaxKeys ?? definition.stateCache?.maxKeys;
  if (maxKeys === undefined) return undefined;
  const where = env.stateCacheMaxKeys !== undefined ? 'KFT_STATE_CACHE_MAX_KEYS' : 'stateCache';
  const p = definition.persistence;
  const local = p.backend === 'kafka' && p.transactional && (env.stateDir !== undefined || p.localState !== undefined);
  if (!local) {
    throw new ConfigError(
      `flow "${definition.name}": ${where} needs local state with transactional Kafka persistence (persistence: { backend: 'kafka', transactional: true, localState: { dir } } or KFT_STATE_DIR): the keys out of memory are read from the local store`,
    );
  }
  if (definition.onTimer || definition.stateTtl) {
    throw new ConfigError(
      `flow "${definition.name}": ${where} does not work with ${definition.onTimer ? 'onTimer' : 'stateTtl'} yet (a restart reads no key, so it would not find their timers); remove one of them`,
    );
  }
  return new StateCache(maxKeys);
}
