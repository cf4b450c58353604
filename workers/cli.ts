import { Command } from 'commander';
import { infraCommand } from './infraCommand';
import { inspectCommand } from './inspectCommand';
import { statusCommand } from './statusCommand';
import { workerCommand } from './workerCommand';

/** The `kafka-flow-temporal` command line (DESIGN.md "Public surface"). */
export function buildCli(): Command {
  const program = new Command('kafka-flow-temporal')
    .description('Stateful Kafka stream processing whose partitions are Temporal workflows')
    .showHelpAfterError();
  program.addCommand(workerCommand());
  program.addCommand(statusCommand());
  program.addCommand(inspectCommand());
  program.addCommand(infraCommand());
  return program;
}

export async function main(argv: string[]): Promise<void> {
  await buildCli().parseAsync(argv);
}
