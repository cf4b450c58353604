// The producer: a steady rate per mode, retrying on errors; only acknowledged sends are counted.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Producer } from 'kafkajs';
import type { ChaosValue } from './flow';
import { KEYS, RATE } from './settings';

/** One record in this many is poison (dead-lettered): half of them not JSON, half `op: poison`. */
const POISON_EVERY = 100;
/** A send carries at most this many seconds' worth of records (and at least 200): a few sends a second at any rate. */
const SEND_SECONDS = 0.2;

export class LoadProducer {
  acked = 0;
  errors = 0;
  private running = false;
  private loop?: Promise<void>;
  /** Each key's modelled counter, by key index (a typed array: no object per key at 50,000 keys). */
  private readonly model = new Int32Array(KEYS);
  private seq = 0;

  constructor(
    private readonly producer: Producer,
    private readonly topic: string,
    private readonly rnd: () => number,
  ) {}

  start(): void {
    this.running = true;
    const most = Math.max(200, Math.ceil(RATE * SEND_SECONDS));
    this.loop = (async () => {
      const started = Date.now();
      while (this.running) {
        const due = Math.floor(((Date.now() - started) / 1000) * RATE) - this.seq;
        if (due <= 0) {
          await sleep(Math.max(5, Math.min(100, Math.ceil(1000 / RATE))));
          continue;
        }
        // The model and the sequence move only once a send is acknowledged: a failed send is built afresh.
        const from = this.seq;
        const saved = new Map<number, number>();
        const messages = Array.from({ length: Math.min(due, most) }, () => this.next(saved));
        try {
          await this.producer.send({ topic: this.topic, acks: -1, timeout: 10_000, messages });
          this.acked += messages.length;
        } catch {
          this.errors++;
          for (const [k, c] of saved) this.model[k] = c;
          this.seq = from;
          await sleep(500);
        }
      }
    })();
  }

  /**
   * inc when the key's (modelled) counter is 0, else inc or dec at even odds: keys die and come
   * back. Every POISON_EVERY-th record is poison instead (the key's counter unchanged).
   */
  private next(saved: Map<number, number>): { key: string; value: string } {
    const k = Math.floor(this.rnd() * KEYS);
    const seq = this.seq++;
    const key = `k${k}`;
    if (seq % POISON_EVERY === POISON_EVERY - 1) return { key, value: seq % (2 * POISON_EVERY) < POISON_EVERY ? `not json ${seq}` : JSON.stringify({ op: 'poison', seq }) };
    const c = this.model[k]!;
    if (!saved.has(k)) saved.set(k, c);
    const op: ChaosValue['op'] = c === 0 || this.rnd() < 0.55 ? 'inc' : 'dec';
    this.model[k] = op === 'inc' ? c + 1 : c - 1;
    return { key, value: JSON.stringify({ op, seq }) };
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}
