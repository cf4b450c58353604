import { KafkaFlowError } from '../config/errors';
import { PartitionStateError } from './errors';
import { EmittedOutputs, OUTPUT_SOURCE_HEADER, type PendingOutput } from '../core/emitted-outputs';
import type { EmitRecord, FoldContext } from './fold';
import { type KeyTimer, type TimerEdit, TimerEdits } from './key-timers';

export { OUTPUT_SOURCE_HEADER };

/** Encodes emitted values (the flow's `outputCodec`; JSON by default). */
export interface OutputEncoder {
  encode(value: unknown): Buffer;
  /**
   * Optional: the encoding as text, when the encoding is that text's UTF-8 bytes (the JSON codec):
   * the emit writes the text's bytes where the output is held, without a Buffer per value.
   */
  encodeText?(value: unknown): string;
}

/** What the engine needs to turn emits into output records. */
export interface OutputOptions {
  /** The topics the fold may emit to (the flow's `outputTopics`). */
  readonly topics: ReadonlySet<string>;
  readonly encoder: OutputEncoder;
}

/**
 * ctx.emit to a topic the flow did not declare (`noOutputTopics`: the flow declares none): thrown
 * inside the fold, so the poison policy applies. Typed so that its message, which holds nothing of
 * the record, is shown in the FoldError even without logKeys.
 */
export class UndeclaredOutputTopicError extends KafkaFlowError {
  constructor(topic: string, noOutputTopics = false) {
    super(
      'UNDECLARED_OUTPUT_TOPIC',
      noOutputTopics ? `ctx.emit: this flow declares no outputTopics (emitted to topic "${topic}")` : `ctx.emit: topic "${topic}" is not one of the flow's outputTopics`,
    );
  }
}

/** Where an emit comes from, for its kafka-flow-source header: a record, or a key's timer (TimerSource). */
export interface EmitSource {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
}

/**
 * A fire's emit source: the key, the timer's name and time in place of a record's offset, so that a
 * fire done again after a crash emits records with the same sources (deduplicated where the backend
 * delivers at least once). The text is built only if the fire emits.
 */
export class TimerSource implements EmitSource {
  private text: string | undefined;

  constructor(
    readonly topic: string,
    readonly partition: number,
    private readonly key: string,
    private readonly name: string,
    private readonly at: number,
  ) {}

  get offset(): string {
    this.text ??= `timer:${encodeURIComponent(this.key)}:${encodeURIComponent(this.name)}:${this.at}`;
    return this.text;
  }
}

/**
 * One key's fold context: collects the emits of the record being folded. The engine `begin`s it
 * before each fold call and `take`s the emits once the fold succeeded (or `discard`s them when it
 * threw), so a failing record's emits never leave. Each key has its own, so async folds of
 * different keys never mix their emits.
 *
 * An emit is encoded at once into a scratch EmittedOutputs (core/emitted-outputs.ts: the record's
 * bytes, its partition or key hash), which the key copies onto its own: held until the key's
 * write as bytes rather than as objects that would live a second. An emit the bytes cannot hold
 * (a header value that is not a string, an odd partition) is kept as a record, and so is every
 * later emit of the same fold, to keep their order.
 */
export class EmitBuffer implements FoldContext {
  private record: EmitSource | undefined;
  /** Emits of the record being folded: the scratch first (if it holds any), then records. */
  private scratch: EmittedOutputs | undefined; // made at the first emit (a context per async fold, most never emit)
  private plain: PendingOutput[] | undefined;
  private emitted = 0;
  /** What `take` hands out when the scratch holds every emit (reused: the key copies it). */
  private taken: PendingOutput[] | undefined;
  private prefixTopic: string | undefined;
  private prefixPartition = -1;
  private prefix = '';
  /** The timer edits of the fold in progress (ctx.timers). */
  readonly timers = new TimerEdits();

  constructor(private readonly options: OutputOptions | undefined) {}

  /** Opens the context for the fold of `record` (or a fire: a TimerSource) on a key with `timers` pending. */
  begin(record: EmitSource, timers?: readonly KeyTimer[]): void {
    this.record = record;
    this.clear();
    this.timers.begin(timers);
  }

  /** The key's timers after the fold just taken, or undefined if it changed none (see TimerEdits.take). */
  takeTimers(): TimerEdit | undefined {
    return this.timers.take();
  }

  /**
   * The emits of the record just folded (undefined if none); the context closes until the next
   * begin. The array and the EmittedOutputs in it are reused by the next record: copy them
   * (`appendOutputs`, which a key's `addOutputs` does) before folding again.
   */
  take(): PendingOutput[] | undefined {
    this.record = undefined;
    if (this.emitted === 0) return undefined;
    const scratch = this.scratch!;
    const plain = this.plain;
    this.emitted = 0;
    this.plain = undefined;
    if (plain === undefined) {
      this.taken ??= [scratch];
      return this.taken;
    }
    return scratch.count > 0 ? [scratch, ...plain] : plain;
  }

  discard(): void {
    this.record = undefined;
    this.clear();
    this.timers.discard();
  }

  private clear(): void {
    if (this.scratch && this.scratch.count > 0) this.scratch.reset();
    this.emitted = 0;
    this.plain = undefined;
  }

  emit(output: EmitRecord): void {
    const record = this.record;
    if (record === undefined) throw new PartitionStateError('ctx.emit was called after the fold of its record had finished');
    const o = this.options;
    if (!o) throw new UndeclaredOutputTopicError(output.topic, true);
    if (!o.topics.has(output.topic)) throw new UndeclaredOutputTopicError(output.topic);
    if (record.topic !== this.prefixTopic || record.partition !== this.prefixPartition) {
      this.prefixTopic = record.topic;
      this.prefixPartition = record.partition;
      this.prefix = `${record.topic}/${record.partition}/`;
    }
    const index = this.emitted;
    const raw = output.value;
    const encoder = o.encoder;
    const value = raw === null || raw === undefined ? null : encoder.encodeText ? encoder.encodeText(raw) : encoder.encode(raw);
    this.scratch ??= new EmittedOutputs(1024, 8);
    if (this.plain === undefined && this.scratch.addEmit(output.topic, output.key, value, output.headers, output.partition, this.prefix, record.offset, index)) {
      this.emitted++;
      return;
    }
    const sourceValue = `${this.prefix}${record.offset}/${index}`;
    this.plain ??= [];
    this.plain.push({
      kind: 'emitted',
      topic: output.topic,
      partition: output.partition,
      key: output.key ?? null,
      value: typeof value === 'string' ? Buffer.from(value, 'utf8') : value,
      headers: output.headers ? { ...output.headers, [OUTPUT_SOURCE_HEADER]: sourceValue } : { [OUTPUT_SOURCE_HEADER]: sourceValue },
    });
    this.emitted++;
  }
}
