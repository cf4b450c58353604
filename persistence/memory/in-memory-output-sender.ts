import type { OutputSender } from '../output-sender';
import { outputRecords, type PendingOutput } from '../../core/emitted-outputs';
import type { OutputRecord, TopicPartition } from '../../core/persistence-types';

/** Outputs (dead letters) collected in an array. For unit tests of the engine only. */
export class InMemoryOutputSender implements OutputSender {
  readonly sent: Array<OutputRecord & { from: TopicPartition }> = [];

  async send(outputs: readonly PendingOutput[], from: TopicPartition): Promise<void> {
    for (const o of outputRecords(outputs)) this.sent.push({ ...o, from });
  }
}
