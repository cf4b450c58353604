import { Command } from 'commander';
import type * as Infra from './infra';
import { readInfraSettings } from './settings';

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

// Loaded when an infra command runs, not with the CLI: the servers' code brings the Cassandra
// driver and the downloaders, which `worker`, `status` and `inspect` do not need at start.
const { up, down, status } = {
  up: (...a: Parameters<typeof Infra.up>) => (require('./infra') as typeof Infra).up(...a),
  down: (...a: Parameters<typeof Infra.down>) => (require('./infra') as typeof Infra).down(...a),
  status: (...a: Parameters<typeof Infra.status>) => (require('./infra') as typeof Infra).status(...a),
};

/** `kafka-flow-temporal infra up|down|status`: the local Kafka, Temporal and Cassandra. */
export function infraCommand(): Command {
  const infra = new Command('infra').description('manage the local Kafka, Temporal and Cassandra servers (cached under .cache/)');

  infra
    .command('up')
    .description('fetch (first time), start and wait for every server; reuses servers already running')
    .action(async () => {
      const settings = readInfraSettings();
      const t0 = Date.now();
      const results = await up(settings, (line) => console.log(`  ${line}`));
      for (const r of results) {
        const how = r.action === 'reused' ? 'already running' : `started in ${seconds(r.ms)}${r.fetched ? ' (fetched first)' : ''}`;
        console.log(`${r.name.padEnd(10)} ${r.version.padEnd(10)} ${r.address.padEnd(16)} ${how}`);
        for (const [name, url] of Object.entries(r.links)) console.log(`${''.padEnd(10)} ${name.padEnd(10)} ${url}`);
      }
      console.log(`infra up: ready in ${seconds(Date.now() - t0)} (logs: ${settings.logDir})`);
    });

  infra
    .command('down')
    .description('stop the servers that `infra up` started (pid files); others are left alone')
    .action(async () => {
      for (const r of await down()) console.log(`${r.name.padEnd(10)} ${r.outcome}`);
    });

  infra
    .command('status')
    .description("print each server's state; exits 1 when one that `infra up` started has died")
    .action(async () => {
      const results = await status();
      for (const r of results) {
        const pid = r.pid !== undefined ? `pid ${r.pid}` : '';
        const note = r.state === 'died' ? `  (process gone; see ${r.logFile})` : '';
        console.log(`${r.name.padEnd(10)} ${r.state.padEnd(17)} ${r.address.padEnd(16)} ${pid}${note}`);
        if (r.state === 'running' || r.state === 'running-external')
          for (const [name, url] of Object.entries(r.links)) console.log(`${''.padEnd(10)} ${name.padEnd(17)} ${url}`);
      }
      if (results.some((r) => r.state === 'died')) process.exitCode = 1;
    });

  return infra;
}
