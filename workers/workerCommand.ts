import { Command, InvalidArgumentError } from 'commander';
import { loadFlowModule } from './flowModule';
import { runWorker } from './worker';

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
    .option('--shutdown-timeout <seconds>', 'exit with code 1 if a graceful stop takes longer', (v) => Number(v), 60)
    .action(async (modulePath: string, opts: { metricsPort?: number; shutdownTimeout: number }) => {
      const flow = loadFlowModule(modulePath);
      const metricsPort = opts.metricsPort ?? (process.env.KFT_METRICS_PORT ? port(process.env.KFT_METRICS_PORT) : undefined);
      const worker = await runWorker(flow, { metricsPort });
      await new Promise<void>((resolve, reject) => {
        let signalled = false;
        const onSignal = (signal: NodeJS.Signals) => {
          if (signalled) return;
          signalled = true;
          const timer = setTimeout(() => {
            process.stderr.write(`kafka-flow-temporal: graceful stop did not finish within ${opts.shutdownTimeout} s after ${signal}\n`);
            process.exit(1);
          }, opts.shutdownTimeout * 1000);
          timer.unref();
          worker.stop().then(resolve, reject);
        };
        process.once('SIGTERM', onSignal);
        process.once('SIGINT', onSignal);
        worker.done.catch(reject);
      });
      // Stopped cleanly: exit now rather than wait for every client library's last handle
      // (a lingering socket or retry timer would otherwise keep the process up).
      setTimeout(() => process.exit(0), 100);
    });
}
