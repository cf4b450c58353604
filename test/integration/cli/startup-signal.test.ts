import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { TcpProxy } from '../../../chaos/tcp-proxy';
import { notPinoLines } from '../../support/pino-lines';
import { kafkaBrokers } from '../../support/servers';
import { eventually, FlowCluster } from '../orchestration/harness';

// A SIGTERM that reaches a worker while it is still starting (connected to Temporal, not yet in
// the group) used to end it by the default action (killed by the signal, no graceful stop). It is
// held now: the worker finishes starting, then stops gracefully and exits 0.
test('SIGTERM while the worker is starting: it finishes starting, then stops gracefully (exit 0)', async () => {
  const cluster = new FlowCluster(2);
  // The worker bootstraps through a proxy that delays every byte by 0.7 s: its Kafka start takes
  // seconds, a window the signal lands in for sure (the broker's advertised address is direct, so
  // only the bootstrap is slow).
  const broker = kafkaBrokers[0]!;
  const proxy = new TcpProxy('kafka', 0, { host: broker.slice(0, broker.lastIndexOf(':')), port: Number(broker.slice(broker.lastIndexOf(':') + 1)) });
  await proxy.start();
  proxy.setMode('delay', 700);
  try {
    await cluster.start();
    await cluster.produce(100);
    // TEMPORAL_LOG_LEVEL=info: Temporal core's lines are in the run too (see the last check).
    const w = cluster.startWorker('a', { KAFKA_BROKERS: `127.0.0.1:${proxy.port}`, TEMPORAL_LOG_LEVEL: 'info' });
    // The Temporal SDK logs these when its workers are created: before the worker joins the group.
    await eventually('the worker is starting', () => (cluster.log(w).includes('No activities registered') ? true : undefined), 60_000, () => cluster.log(w));
    const startedBeforeSignal = cluster.log(w).includes('"msg":"worker started"');
    w.process.kill('SIGTERM');
    const code = await w.exited;
    const log = cluster.log(w);
    expect(startedBeforeSignal).toBe(false); // the signal did come during the start
    expect({ code, started: log.includes('"msg":"worker started"'), stopped: log.includes('"msg":"stopped"') }).toEqual({ code: 0, started: true, stopped: true });
    // A whole run, start to graceful stop through a slow broker: every line it printed (stdout and stderr) is a pino line.
    expect(notPinoLines(log)).toEqual([]);
    expect(log).toContain('"sdkComponent":"core"');
  } finally {
    await cluster.close();
    await proxy.close();
  }
}, 120_000);

// Earlier still — while the CLI itself is loading (tsx, the commands, the flow module) — a
// SIGTERM used to end the worker by the signal's default action (the chaos suite saw it as
// "killed by SIGTERM" on a busy machine). Now nothing starts and it exits 0.
test('SIGTERM while the CLI is still loading: the worker exits 0 without starting', async () => {
  const cluster = new FlowCluster(1);
  try {
    // An empty compile cache (TMPDIR): the CLI compiles every file it loads (bin/ts-loader.js).
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kft-early-'));
    const w = cluster.startWorker('early', { TMPDIR: tmp });
    // Node is up in ≈ 0.05–0.2 s and runs the bin script's first lines; compiling and loading the
    // CLI and the flow module takes ≥ 1.5 s (far longer on a busy machine): 0.6 s lands in between.
    await new Promise((r) => setTimeout(r, 600));
    w.process.kill('SIGTERM');
    const code = await w.exited;
    const log = cluster.log(w);
    expect(log).not.toContain('"msg":"worker started"');
    expect({ code, stoppedBeforeStart: log.includes('stopped before starting') }).toEqual({ code: 0, stoppedBeforeStart: true });
    fs.rmSync(tmp, { recursive: true, force: true });
  } finally {
    await cluster.close();
  }
}, 60_000);
