import { Command, InvalidArgumentError } from 'commander';
import { loadFlowModule } from './flow-module';
import type { InspectFilter } from './inspect';
import type * as Inspect from './inspect';

const partitionNumber = (v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('a partition number');
  return n;
};

/** `kafka-flow-temporal inspect <flow-module> [--partition p] [--key k]`. */
export function inspectCommand(): Command {
  return new Command('inspect')
    .description('print the persisted state as JSON lines {topic, partition, key, offset, state}')
    .argument('<flow-module>', 'path to the flow module')
    .option('--topic <topic>', 'only this input topic')
    .option('--partition <p>', 'only this partition', partitionNumber)
    .option('--key <key>', 'only this key')
    .action(async (modulePath: string, opts: InspectFilter) => {
      const flow = loadFlowModule(modulePath);
      let n = 0;
      // Loaded when `inspect` runs, not with the CLI (the persistence backends' readers).
      const { inspectFlow } = require('./inspect') as typeof Inspect;
      for await (const k of inspectFlow(flow, opts)) {
        process.stdout.write(`${JSON.stringify(k)}\n`);
        n++;
      }
      process.stderr.write(`${n} key(s)\n`);
    });
}
