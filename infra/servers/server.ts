import type { ManagedProcess } from '../processes';
import type { InfraSettings, ServerName } from '../settings';

/** One local server that `infra` can fetch, start, probe and stop. */
export interface Server {
  name: ServerName;
  version: string;
  /** Where clients connect, e.g. 127.0.0.1:9092. */
  address: string;
  /** Extra things to print, e.g. the Temporal UI URL. */
  links: Record<string, string>;
  process: ManagedProcess;
  /** Downloads into the cache if not there yet; true when something was fetched. */
  install(log: (line: string) => void): Promise<boolean>;
  /** Writes its configuration (idempotent) and spawns it detached. */
  start(log: (line: string) => void): Promise<void>;
  /** One real readiness check (a client call, not just an open port); must return within seconds. */
  probe(): Promise<boolean>;
  /** Runs once the server is ready, also when it was already running (e.g. registering search attributes). */
  afterReady?(log: (line: string) => void): Promise<void>;
}

export const processFor = (s: InfraSettings, name: ServerName, marker: string): ManagedProcess => ({
  name,
  pidFile: `${s.runDir}/${name}.pid`,
  logFile: `${s.logDir}/${name}.log`,
  marker,
});
