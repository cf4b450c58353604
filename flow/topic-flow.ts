import { PartitionStateError } from './errors';
import type { PartitionFlow } from './partition-flow';
import type { InputMessage } from './record';

/** The partitions of one topic this process owns, each its own PartitionFlow. */
export class TopicFlow<S, V> {
  private readonly partitions = new Map<number, PartitionFlow<S, V>>();

  constructor(readonly topic: string) {}

  add(flow: PartitionFlow<S, V>): void {
    if (flow.topic !== this.topic) throw new PartitionStateError(`partition of topic "${flow.topic}" added to topic "${this.topic}"`);
    this.partitions.set(flow.partition, flow);
  }

  remove(partition: number): PartitionFlow<S, V> | undefined {
    const flow = this.partitions.get(partition);
    this.partitions.delete(partition);
    return flow;
  }

  get(partition: number): PartitionFlow<S, V> | undefined {
    return this.partitions.get(partition);
  }

  all(): IterableIterator<PartitionFlow<S, V>> {
    return this.partitions.values();
  }

  /** Routes a partition's batch; a batch for a partition not (or no longer) owned is refused. */
  handleBatch(partition: number, messages: readonly InputMessage[]): void | Promise<void> {
    const flow = this.partitions.get(partition);
    if (!flow) throw new PartitionStateError(`topic "${this.topic}" partition ${partition} is not assigned here`);
    return flow.handleBatch(messages);
  }
}

/** All topics of a consumer: routes each kafkajs batch to its topic, then partition. */
export class ConsumerFlow<S, V> {
  private readonly topics = new Map<string, TopicFlow<S, V>>();

  topic(name: string): TopicFlow<S, V> {
    let flow = this.topics.get(name);
    if (!flow) {
      flow = new TopicFlow<S, V>(name);
      this.topics.set(name, flow);
    }
    return flow;
  }

  /** kafkajs eachBatch's `batch` has exactly these fields. */
  handleBatch(batch: { topic: string; partition: number; messages: readonly InputMessage[] }): void | Promise<void> {
    const flow = this.topics.get(batch.topic);
    if (!flow) throw new PartitionStateError(`topic "${batch.topic}" is not consumed by this flow`);
    return flow.handleBatch(batch.partition, batch.messages);
  }
}
