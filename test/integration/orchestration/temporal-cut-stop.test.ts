import path from 'node:path';
import { TcpProxy } from '../../../chaos/tcp-proxy';
import { temporalAddress } from '../../support/servers';
import { eventually, FlowCluster } from './harness';

const [temporalHost, temporalPort] = [temporalAddress.slice(0, temporalAddress.lastIndexOf(':')), Number(temporalAddress.slice(temporalAddress.lastIndexOf(':') + 1))];
const lateExit = path.join(__dirname, '../../fixtures/late-exit.js');

// A worker whose Temporal connection goes through a loopback proxy is stopped with SIGTERM, and
// Temporal is cut off (the proxy drops every connection) while the stop waits for the partition
// workflows to handle its revoke signals: their describe calls fail and the Temporal client
// retries them from timers. The stop gives up waiting, closes the client and logs "stopped"; a
// retry firing after that must not throw "Channel has been shut down" from its timer (uncaught:
// exit 1) — the worker exits 0. Timing: the proxy first adds 2 s of latency each way, so that the
// revoke signals land (≈ 4 s after the SIGTERM) and the first describe is still on its way when
// the cut comes (6 s after). The worker is kept alive 8 s past its decision to exit
// (test/fixtures/late-exit.js), so a pending retry (at most ≈ 6 s apart) fires every time.
test('a graceful stop while Temporal is cut off, with calls being retried, exits 0 after "stopped"', async () => {
  const proxy = new TcpProxy('temporal', 0, { host: temporalHost, port: temporalPort });
  await proxy.start();
  const cluster = new FlowCluster(2);
  try {
    await cluster.start();
    await cluster.produce(200);
    const w = cluster.startWorker('w', { TEMPORAL_ADDRESS: `127.0.0.1:${proxy.port}`, NODE_OPTIONS: `--require ${lateExit}`, LATE_EXIT_MS: '8000' });
    await eventually('running', () => cluster.runningOn(1), 90_000);
    await eventually('caught up', () => cluster.caughtUp(), 60_000);
    proxy.setMode('delay', 2_000);
    await new Promise((r) => setTimeout(r, 1_000));
    const exited = cluster.stop(w);
    await new Promise((r) => setTimeout(r, 6_000));
    proxy.setMode('drop');
    const code = await exited;
    const log = cluster.log(w);
    const messages = cluster.logLines<{ msg: string }>(w).map((l) => l.msg);
    expect({
      code,
      stopped: messages.includes('stopped'),
      // The stop did wait on workflows it had signalled (the describe calls the cut left retrying).
      waitedOnWorkflows: messages.includes('stopping the Temporal workers before these partition workflows handled the revoke (the next worker will)'),
      channelShutDown: /Channel has been shut down/.test(log),
    }).toEqual({ code: 0, stopped: true, waitedOnWorkflows: true, channelShutDown: false });
  } finally {
    proxy.setMode('pass');
    await cluster.close();
    await proxy.close();
  }
}, 240_000);
