import { Command } from 'commander';
import { positiveSeconds } from './cli-arguments';
import { loadFlowModule } from './flow-module';
import type * as FlowStatus from './flow-status';
import { DEFAULT_QUERY_TIMEOUT_MS } from './status-timeouts';

// Loaded when `status` runs, not with the CLI: the Temporal client and kafkajs a `worker` loads
// later, when its start no longer waits on them (≈ 0.25 s of loading at every worker start).
const flowStatus = () => require('./flow-status') as typeof FlowStatus;


/** Without --query-timeout, the command answers within about this long of its start. */
const ANSWER_WITHIN_MS = 4_000;


/**
 * `kafka-flow-temporal status <flow-module>`: each partition workflow's status as a table. The
 * status queries run at once with a short deadline (so the command answers within ≈ 4 s of its
 * start); a workflow no worker answered for (no worker running) shows what its search attributes
 * say, with one hint line on stderr.
 */
export function statusCommand(): Command {
  return new Command('status')
    .description("print each partition workflow's status (phase, owner, generation, committed offset, lag)")
    .argument('<flow-module>', 'path to the flow module')
    .option('--json', 'one JSON object per partition instead of a table ("source": "query" or "search-attributes")')
    .option(
      '--query-timeout <seconds>',
      `how long to wait for the workers to answer the status queries (default: ${DEFAULT_QUERY_TIMEOUT_MS / 1000} s, less when the command took long to start: it answers within ≈ ${ANSWER_WITHIN_MS / 1000} s; at least 1 s)`,
      positiveSeconds,
    )
    .action(async (modulePath: string, opts: { json?: boolean; queryTimeout?: number }) => {
      const flow = loadFlowModule(modulePath);
      const { fallbackHint, flowStatusRows, formatStatus } = flowStatus();
      const rows = await flowStatusRows(
        flow.name,
        opts.queryTimeout !== undefined
          ? { queryTimeoutMs: opts.queryTimeout * 1000 }
          : // performance.now(): ms since this process started (Node's start-up counts against the budget).
            { answerBy: Date.now() - performance.now() + ANSWER_WITHIN_MS - 300 },
      );
      if (opts.json) for (const r of rows) console.log(JSON.stringify(r));
      else if (rows.length === 0) console.log(`no running partition workflows for flow "${flow.name}" (is a worker running?)`);
      else console.log(formatStatus(rows));
      const hint = fallbackHint(rows);
      if (hint) process.stderr.write(`${hint}\n`);
    });
}
