import { Command } from 'commander';
import { positiveSeconds } from './cli-arguments';
import type * as Retire from './retire';

// Loaded when `retire` runs, not with the CLI (the Temporal client).
const retire = () => require('./retire') as typeof Retire;


/**
 * `kafka-flow-temporal retire <flow>`: ends the partition workflows of a decommissioned flow
 * (by name: its module may be gone). Refuses while workers of the flow are alive unless --force.
 */
export function retireCommand(): Command {
  return new Command('retire')
    .description("end a decommissioned flow's partition workflows (refused while its workers are alive, unless --force)")
    .argument('<flow>', 'the flow name (its KafkaFlow search attribute)')
    .option('--force', 'retire even while workers of the flow are alive (they start its partition workflows again)')
    .option('--wait <seconds>', 'how long the workflows may take to end on the retire signal before they are terminated (default 20)', positiveSeconds)
    .action(async (flow: string, opts: { force?: boolean; wait?: number }) => {
      const retired = await retire().retireFlow(flow, { force: opts.force, ...(opts.wait !== undefined ? { waitMs: opts.wait * 1000 } : {}) });
      if (retired.length === 0) {
        console.log(`no running partition workflows of flow "${flow}"`);
        return;
      }
      for (const r of retired) console.log(`${r.workflowId}  ${r.outcome}`);
      const terminated = retired.filter((r) => r.outcome === 'terminated').length;
      console.log(`retired ${retired.length} partition workflows of flow "${flow}" (${retired.length - terminated} completed, ${terminated} terminated)`);
    });
}
