import { Command, InvalidArgumentError } from 'commander';
import { loadFlowModule } from './flow-module';
import type * as GetKey from './get-key';

const partitionNumber = (v: string): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('a partition number');
  return n;
};

/**
 * `kafka-flow-temporal get <flow-module> <key>`: the key's live state from the partition's owner
 * (one JSON line), or, with no live owner that answers, its persisted snapshot (with a line on
 * stderr saying why).
 */
export function getCommand(): Command {
  return new Command('get')
    .description("print a key's live state from its owner (or its persisted snapshot when no live owner answers) as one JSON line")
    .argument('<flow-module>', 'path to the flow module')
    .argument('<key>', 'the key (as the producer sets it)')
    .option('--topic <topic>', 'the input topic (needed when the flow reads several)')
    .option('--partition <p>', "the partition (default: the key's, by Kafka's default partitioner; needed for a flow with remapKey)", partitionNumber)
    .action(async (modulePath: string, key: string, opts: { topic?: string; partition?: number }) => {
      const flow = loadFlowModule(modulePath);
      // Loaded when `get` runs, not with the CLI (the Temporal client, kafkajs, the backends' readers).
      const { getKey } = require('./get-key') as typeof GetKey;
      const answer = await getKey(flow, { key, ...opts });
      process.stdout.write(`${JSON.stringify(answer)}\n`);
      if (answer.source === 'snapshot') process.stderr.write(`no live owner answered (${answer.reason}): the persisted snapshot\n`);
    });
}
