import fs from 'node:fs';
import { Command, InvalidArgumentError } from 'commander';
import { type LogLevelName, readWorkerEnv } from '../../config/env';
import { releaseEarlySignal } from './early-signal';
import { loadFlowModule } from './flow-module';
import { createLogger } from '../observability/logger';
import { startBlockedLoopWatchdog } from '../observability/blocked-loop-watchdog';

const port = (v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('a port number 0..65535 (0: any free port)');
  return n;
};

/** `kafka-flow-temporal worker <flow-module>`: one worker process. */
export function workerCommand(): Command {
  return new Command('worker')
    .description('run one worker process of a flow (a .ts or .js module exporting defineFlow(...))')
    .argument('<flow-module>', 'path to the flow module')
    .option('--metrics-port <port>', 'serve Prometheus /metrics on this port (0: any free port; env KFT_METRICS_PORT)', port)
    .option('--metrics-host <address>', 'the address /metrics binds (default 127.0.0.1: this machine only; 0.0.0.0: every interface; env KFT_METRICS_HOST)')
    .option('--shutdown-timeout <seconds>', 'exit with code 1 if a graceful stop takes longer', (v) => Number(v), 60)
    .action(async (modulePath: string, opts: { metricsPort?: number; metricsHost?: string; shutdownTimeout: number }) => {
      // A SIGTERM/SIGINT while the worker is still starting (connecting, joining the group) is
      // held, not fatal: once started, the worker stops gracefully at once. One that comes before
      // anything has started (the CLI or the flow module still loading) ends it at once, exit 0.
      // The shutdown timeout runs from the signal either way.
      let signalled: NodeJS.Signals | undefined;
      let onStarted: ((signal: NodeJS.Signals) => void) | undefined;
      const onSignal = (signal: NodeJS.Signals) => {
        if (signalled) return;
        signalled = signal;
        const timer = setTimeout(() => {
          createLogger({ flow: flow.name }, env.logLevel).error({ signal, shutdownTimeout: opts.shutdownTimeout }, `graceful stop did not finish within ${opts.shutdownTimeout} s after ${signal}`);
          process.exit(1);
        }, opts.shutdownTimeout * 1000);
        timer.unref();
        onStarted?.(signal);
      };
      process.once('SIGTERM', onSignal);
      process.once('SIGINT', onSignal);
      const early = releaseEarlySignal();
      if (early) onSignal(early);
      const commandAt = Math.round(performance.now());
      const flow = loadFlowModule(modulePath);
      const flowLoadedAt = Math.round(performance.now());
      const env = readWorkerEnv(opts.metricsHost !== undefined ? { ...process.env, KFT_METRICS_HOST: opts.metricsHost } : process.env);
      if (env.exitWithParent) watchParent(flow.name, env.logLevel);
      if (env.blockedExitMs > 0) startBlockedLoopWatchdog({ blockedMs: env.blockedExitMs, flow: flow.name });
      const metricsPort = opts.metricsPort ?? env.metricsPort;
      // Loaded here, not at the top: the Temporal worker SDK takes a second or two to load, which
      // the other commands (status, inspect, infra) do not need.
      const { runWorker, StartupMarks } = require('../worker') as typeof import('../worker');
      const startup = new StartupMarks();
      startup.mark('command', commandAt);
      startup.mark('flowLoaded', flowLoadedAt);
      startup.mark('workerLoaded');
      // Loading is synchronous: a signal that came meanwhile is dispatched at the next turn of
      // the event loop (to the handlers above), so take one before deciding to start.
      await new Promise((resolve) => setImmediate(resolve));
      if (signalled) return stoppedBeforeStart(flow.name, env.logLevel, signalled);
      const worker = await runWorker(flow, { metricsPort, env, startup });
      await new Promise<void>((resolve, reject) => {
        onStarted = () => worker.stop().then(resolve, reject);
        if (signalled) onStarted(signalled);
        worker.done.catch(reject);
      });
      // Stopped cleanly: exit now rather than wait for every client library's last handle
      // (a lingering socket or retry timer would otherwise keep the process up).
      setTimeout(() => process.exit(0), 100);
    });
}

/** A signal came before the worker had started anything: nothing to flush or leave. */
function stoppedBeforeStart(flowName: string, level: LogLevelName, signal: NodeJS.Signals): void {
  createLogger({ flow: flowName }, level).info({ signal }, 'stopped before starting: nothing to flush');
  setTimeout(() => process.exit(0), 100);
}

const SHELLS = new Set(['sh', 'dash', 'bash', 'ash', 'zsh', 'busybox']);

/**
 * npx (npm exec) and `npm run` do not pass SIGTERM/SIGINT on to the worker: npm dies, the `sh -c`
 * it runs the bin through dies with it, and the worker would go on as an orphan. So a worker
 * started through npm (npm_execpath set; KFT_EXIT_WITH_PARENT=1 forces it, 0 turns it off) watches
 * its parent — and, when that is a shell, the shell's parent (npm) — and when one of them is gone
 * sends itself SIGTERM: the same graceful stop (flush, commit, leave the group). Before the worker
 * has started, that SIGTERM simply ends the process, as a real one would.
 */
function watchParent(flowName: string, logLevel: LogLevelName): void {
  const parent = process.ppid;
  if (parent <= 1) return;
  const info = procStat(parent);
  const grandparent = info && SHELLS.has(info.comm) && info.ppid > 1 ? info.ppid : undefined;
  const timer = setInterval(() => {
    const gone = process.ppid !== parent ? parent : grandparent !== undefined && !alive(grandparent) ? grandparent : undefined;
    if (gone === undefined) return;
    clearInterval(timer);
    createLogger({ flow: flowName }, logLevel).info(
      { parent, grandparent, gone },
      'the parent process is gone (npx and npm run do not pass signals on): stopping as on SIGTERM',
    );
    process.kill(process.pid, 'SIGTERM');
  }, 500);
  timer.unref();
}

/** A process's command name, parent and state from /proc (Linux); undefined elsewhere or when gone. */
function procStat(pid: number): { comm: string; ppid: number; state: string } | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const open = stat.indexOf('(');
    const close = stat.lastIndexOf(')');
    const [state, ppid] = stat.slice(close + 2).split(' ');
    return { comm: stat.slice(open + 1, close), ppid: Number(ppid), state: state! };
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  if (fs.existsSync('/proc/self/stat')) {
    const s = procStat(pid);
    return s !== undefined && s.state !== 'Z' && s.state !== 'X'; // a zombie has exited
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
