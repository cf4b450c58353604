/**
 * What a worker's local state allows, checked before anything connects: whether the flow has
 * local state (Kafka or Cassandra persistence with `persistence.localState` or KFT_STATE_DIR),
 * its bounded state cache (FlowOptions.stateCache, KFT_STATE_CACHE_MAX_KEYS / _MAX_BYTES) and its standby
 * replicas (FlowOptions.standbyReplicas, KFT_STANDBY_REPLICAS). Both need local state. Key timers
 * (onTimer, stateTtl) work with the cache: the local store's due-time index finds the keys out of
 * memory whose timers come due (flow/stored-timers.ts).
 */
import { ConfigError } from '../../config/errors';
import type { FlowDefinition } from '../../define-flow';
import { StateCache } from '../../flow/state-cache';
import { localStateRefusal, type ResolvedCassandraPersistence } from '../../persistence/cassandra/options';

export interface LocalStateEnv {
  readonly stateDir?: string;
  readonly stateCacheMaxKeys?: number;
  readonly stateCacheMaxBytes?: number;
  readonly standbyReplicas?: number;
}

/** The flow keeps local state in this worker (Kafka, or Cassandra that can: persistence/cassandra/options.ts localStateRefusal). */
export function hasLocalState<S, V>(definition: FlowDefinition<S, V>, env: LocalStateEnv): boolean {
  const p = definition.persistence;
  if (p.backend === 'kafka') return env.stateDir !== undefined || p.localState !== undefined;
  if (p.backend === 'cassandra') {
    const c = p as unknown as ResolvedCassandraPersistence;
    return c.localState !== undefined || (env.stateDir !== undefined && localStateRefusal(c) === undefined);
  }
  return false;
}

function needsLocalState<S, V>(definition: FlowDefinition<S, V>, env: LocalStateEnv, what: string): void {
  if (hasLocalState(definition, env)) return;
  throw new ConfigError(
    `flow "${definition.name}": ${what} needs local state: Kafka persistence (persistence: { backend: 'kafka', localState: { dir } } or KFT_STATE_DIR) or Cassandra persistence in mode 'snapshots' with a generation fence (persistence.localState or KFT_STATE_DIR)`,
  );
}

export function stateCacheOf<S, V>(definition: FlowDefinition<S, V>, env: LocalStateEnv): StateCache | undefined {
  const maxKeys = env.stateCacheMaxKeys ?? definition.stateCache?.maxKeys;
  const maxBytes = env.stateCacheMaxBytes ?? definition.stateCache?.maxBytes;
  if (maxKeys === undefined && maxBytes === undefined) return undefined;
  const fromEnv = [env.stateCacheMaxKeys !== undefined && 'KFT_STATE_CACHE_MAX_KEYS', env.stateCacheMaxBytes !== undefined && 'KFT_STATE_CACHE_MAX_BYTES'].filter(Boolean);
  const where = fromEnv.length > 0 ? fromEnv.join(' and ') : 'stateCache';
  needsLocalState(definition, env, `${where} (the keys out of memory are read from the local store)`);
  return new StateCache({ maxKeys, maxBytes });
}

/** How many standby copies of each partition the group keeps (0: none). */
export function standbyReplicasOf<S, V>(definition: FlowDefinition<S, V>, env: LocalStateEnv): number {
  const replicas = env.standbyReplicas ?? definition.standbyReplicas;
  if (replicas === 0) return 0;
  const what = `${env.standbyReplicas !== undefined ? 'KFT_STANDBY_REPLICAS' : 'standbyReplicas'} (a standby copy is kept in the local store)`;
  needsLocalState(definition, env, what);
  if (definition.persistence.backend !== 'kafka') {
    throw new ConfigError(`flow "${definition.name}": ${what} tails the snapshot topic: it needs Kafka persistence (Cassandra has no changelog to tail)`);
  }
  return replicas;
}
