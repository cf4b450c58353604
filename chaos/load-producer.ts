// The producer: a steady rate per mode, retrying on errors; only acknowledged sends are counted.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Producer } from 'kafkajs';
import type { ChaosValue } from '../test/fixtures/chaos-flow';
import { KEYS, RATE } from './settings';

export class LoadProducer {
  acked = 0;
  errors = 0;
  private running = false;
  private loop?: Promise<void>;
  private readonly model = new Map<string, number>();
  private seq = 0;

  constructor(
    private readonly producer: Producer,
    private readonly topic: string,
    private readonly rnd: () => number,
  ) {}

  start(): void {
    this.running = true;
    this.loop = (async () => {
      const started = Date.now();
      let due = 0;
      while (this.running) {
        due = Math.floor(((Date.now() - started) / 1000) * RATE) - this.seq;
        if (due > 0) {
          const n = Math.min(due, 200);
          const messages = Array.from({ length: n }, () => this.next());
          try {
            await this.producer.send({ topic: this.topic, acks: -1, timeout: 10_000, messages });
            this.acked += n;
          } catch {
            this.errors++;
            await sleep(500);
          }
        }
        await sleep(100);
      }
    })();
  }

  /** inc when the key's (modelled) counter is 0, else inc or dec at even odds: keys die and come back. */
  private next(): { key: string; value: string } {
    const key = `k${Math.floor(this.rnd() * KEYS)}`;
    const c = this.model.get(key) ?? 0;
    const op: ChaosValue['op'] = c === 0 || this.rnd() < 0.55 ? 'inc' : 'dec';
    this.model.set(key, op === 'inc' ? c + 1 : c - 1);
    return { key, value: JSON.stringify({ op, seq: this.seq++ }) };
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}
