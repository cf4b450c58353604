import { Command } from 'commander';
import { loadFlowModule } from './flowModule';
import { flowStatus, formatStatus } from './flowStatus';

/** `kafka-flow-temporal status <flow-module>`: each partition workflow's status as a table. */
export function statusCommand(): Command {
  return new Command('status')
    .description("print each partition workflow's status (phase, owner, generation, committed offset, lag)")
    .argument('<flow-module>', 'path to the flow module')
    .option('--json', 'one JSON object per partition instead of a table')
    .action(async (modulePath: string, opts: { json?: boolean }) => {
      const flow = loadFlowModule(modulePath);
      const rows = await flowStatus(flow.name);
      if (opts.json) for (const r of rows) console.log(JSON.stringify(r));
      else if (rows.length === 0) console.log(`no running partition workflows for flow "${flow.name}" (is a worker running?)`);
      else console.log(formatStatus(rows));
    });
}
