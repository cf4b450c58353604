import { setTimeout as sleep } from 'node:timers/promises';
import { KafkaFlowError } from '../config/errors';
import { livePid, recordedPid, stopProcess, tailLog } from './processes';
import { cassandraServer } from './servers/cassandra';
import { cassandraSecureServer } from './servers/cassandra-secure';
import { kafkaServer } from './servers/kafka';
import type { Server } from './servers/server';
import { temporalServer } from './servers/temporal';
import { temporalTlsServer } from './servers/temporal-tls';
import { type InfraSettings, OPTIONAL_SERVER_NAMES, readInfraSettings, type ServerName } from './settings';

export type Log = (line: string) => void;

const FACTORIES: Record<ServerName, (s: InfraSettings) => Server> = {
  kafka: kafkaServer,
  temporal: temporalServer,
  cassandra: cassandraServer,
  'temporal-tls': temporalTlsServer,
  'cassandra-secure': cassandraSecureServer,
};

export const serversOf = (s: InfraSettings): Server[] => s.servers.map((name) => FACTORIES[name](s));

/** The configured servers plus any optional (secured) one that `up` started and that is still recorded: `down` and `status` cover them. */
const serversWithStarted = (s: InfraSettings): Server[] => [
  ...serversOf(s),
  ...OPTIONAL_SERVER_NAMES.filter((name) => !s.servers.includes(name))
    .map((name) => FACTORIES[name](s))
    .filter((server) => recordedPid(server.process) !== undefined),
];

/** A server that did not come up: names its log file and quotes its last lines. */
export class ServerStartError extends KafkaFlowError {
  constructor(
    readonly server: ServerName,
    reason: string,
    readonly logFile: string,
  ) {
    super('SERVER_START', `${server} ${reason}; log: ${logFile}\n--- last lines ---\n${tailLog(logFile, 25)}`);
  }
}

export interface UpResult {
  name: ServerName;
  version: string;
  address: string;
  links: Record<string, string>;
  /** reused: it was already answering; started: this call started it. */
  action: 'reused' | 'started';
  fetched: boolean;
  ms: number;
}

/**
 * Brings every configured server up, in parallel. Idempotent: a server that answers is reused
 * (started by us or not); one that does not is fetched if needed, started and waited for with a
 * real client call, up to the readiness timeout.
 */
export async function up(settings = readInfraSettings(), log: Log = () => {}): Promise<UpResult[]> {
  return Promise.all(serversOf(settings).map((server) => upOne(settings, server, log)));
}

async function upOne(settings: InfraSettings, server: Server, log: Log): Promise<UpResult> {
  const started = Date.now();
  const say = (line: string) => log(`${server.name}: ${line}`);
  const result = (action: UpResult['action'], fetched: boolean): UpResult => ({
    name: server.name,
    version: server.version,
    address: server.address,
    links: server.links,
    action,
    fetched,
    ms: Date.now() - started,
  });
  if (await server.probe()) {
    await server.afterReady?.(say);
    return result('reused', false);
  }
  if (livePid(server.process) !== undefined) {
    // Ours and alive but not answering yet: a previous `up` is still starting it (or it hangs).
    say('already starting; waiting for it');
  } else {
    const fetched = await server.install(say);
    say('starting');
    await server.start(say);
    await waitReady(settings, server);
    await server.afterReady?.(say);
    return result('started', fetched);
  }
  await waitReady(settings, server);
  await server.afterReady?.(say);
  return result('started', false);
}

async function waitReady(settings: InfraSettings, server: Server): Promise<void> {
  const deadline = Date.now() + settings.readyTimeoutMs;
  while (Date.now() < deadline) {
    if (await server.probe()) return;
    if (livePid(server.process) === undefined) {
      throw new ServerStartError(server.name, 'exited before it became ready', server.process.logFile);
    }
    await sleep(250);
  }
  throw new ServerStartError(
    server.name,
    `was not ready within ${settings.readyTimeoutMs / 1000} s (KFT_INFRA_TIMEOUT_SECONDS)`,
    server.process.logFile,
  );
}

export interface DownResult {
  name: ServerName;
  outcome: 'stopped' | 'killed' | 'not-running';
}

/** Stops only what `up` started (its pid files); a server started by someone else is left alone. */
export async function down(settings = readInfraSettings()): Promise<DownResult[]> {
  return Promise.all(
    serversWithStarted(settings).map(async (server) => ({ name: server.name, outcome: await stopProcess(server.process) })),
  );
}

export type ServerState =
  | 'running' // answering, started by `infra up`
  | 'running-external' // answering, not started by us
  | 'starting' // our process is alive but not answering yet
  | 'died' // we started it, its process is gone
  | 'stopped';

export interface StatusResult {
  name: ServerName;
  state: ServerState;
  address: string;
  pid?: number;
  logFile: string;
  links: Record<string, string>;
}

export async function status(settings = readInfraSettings()): Promise<StatusResult[]> {
  return Promise.all(
    serversWithStarted(settings).map(async (server) => {
      const pid = livePid(server.process);
      const answering = await server.probe();
      let state: ServerState;
      if (answering) state = pid !== undefined ? 'running' : 'running-external';
      else if (pid !== undefined) state = 'starting';
      else state = recordedPid(server.process) !== undefined ? 'died' : 'stopped';
      return {
        name: server.name,
        state,
        address: server.address,
        pid: pid ?? recordedPid(server.process),
        logFile: server.process.logFile,
        links: server.links,
      };
    }),
  );
}
