import { Command } from 'commander';
import { infraCommand } from './infra/infra-command';
import { getCommand } from './workers/cli/get-command';
import { inspectCommand } from './workers/cli/inspect-command';
import { retireCommand } from './workers/cli/retire-command';
import { statusCommand } from './workers/cli/status-command';
import { workerCommand } from './workers/cli/worker-command';

/**
 * The `kafka-flow-temporal` command line (README, *Operations*), assembled here, above the
 * layers: the flow commands come from `workers/cli/`, the local servers' command from `infra/`, and
 * neither of those folders imports the other.
 */
export function buildCli(): Command {
  const program = new Command('kafka-flow-temporal')
    .description('Stateful Kafka stream processing whose partitions are Temporal workflows')
    .showHelpAfterError();
  program.addCommand(workerCommand());
  program.addCommand(statusCommand());
  program.addCommand(inspectCommand());
  program.addCommand(getCommand());
  program.addCommand(retireCommand());
  program.addCommand(infraCommand());
  return program;
}

export async function main(argv: string[]): Promise<void> {
  await buildCli().parseAsync(argv);
}
