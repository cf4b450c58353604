import { PartitionFlow } from '../../flow/partition-flow';

/**
 * Records how many outputs a partition holds right after each batch slice it was handed
 * (`PartitionFlow.pendingOutputs`), for the tests of `maxPendingOutputs`. `restore()` when done.
 */
export function recordPendingOutputs(): { held: number[]; restore: () => void } {
  const held: number[] = [];
  const handleBatch = PartitionFlow.prototype.handleBatch;
  const spy = jest.spyOn(PartitionFlow.prototype, 'handleBatch').mockImplementation(function (this: PartitionFlow<unknown, unknown>, messages) {
    const r = handleBatch.call(this, messages);
    held.push(this.pendingOutputs);
    return r;
  });
  return { held, restore: () => spy.mockRestore() };
}
