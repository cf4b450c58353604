// `kafka-flow-temporal/testing`: what a user's tests need to run a flow without servers — the
// engine of one partition over in-memory stores, a clock the test moves, and the workflow code to
// replay recorded partition-workflow histories against (README "Replaying workflow histories").
// The same classes as the package root exports (not copies): instanceof works across both.
export { type Clock, ManualClock } from './flow/clock';
export { createPartitionFlow, type PartitionContext } from './flow/create-partition-flow';
export { type Logger, silentLogger } from './core/logger';
export type { InputMessage } from './flow/record';
export {
  InMemoryBackend,
  InMemoryJournalStore,
  InMemoryKeyStore,
  InMemoryOffsetCommitter,
  InMemorySnapshotStore,
} from './persistence/memory';

/**
 * The partition workflows' code, for `Worker.runReplayHistories({ workflowsPath }, histories)`
 * (`@temporalio/worker`). A path, so that importing this module does not load the Temporal worker.
 */
export const workflowsPath: string = require.resolve('./workflows');
