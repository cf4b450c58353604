import type { PartitionReader } from '../../kafka';
import { inspectFlow } from '../../workers/cli/inspect';

/**
 * The processing-time timer checks of test/fixtures/reminder-flow.ts (each fire emits a reminder
 * numbered by the key's count of fires): the reminders on the output topic, and that every fire in
 * a key's persisted state has its one reminder and none other.
 */
export interface Reminder {
  key: string;
  fire: number;
}

/** Every reminder on the output topic (2 partitions), read committed. */
export async function readReminders(reader: PartitionReader, topic: string): Promise<Reminder[]> {
  const out: Reminder[] = [];
  await reader.readTopic(topic, 2, (r) => out.push(JSON.parse(String(r.value)) as Reminder));
  return out;
}

/** Every key has a reminder of its `n`th fire (or a later one). */
export function firedAtLeast(reminders: readonly Reminder[], keys: readonly string[], n: number): boolean {
  const seen = new Map<string, number>();
  for (const o of reminders) seen.set(o.key, Math.max(seen.get(o.key) ?? 0, o.fire));
  return keys.every((k) => (seen.get(k) ?? 0) >= n);
}

/**
 * The fires in each key's persisted state (inspect, with the flow the workers loaded: the fixture
 * names it from the environment `names` set) against its reminders: 1…fires, each once. Each key
 * has fired at least `minFires` times.
 */
export async function expectOneReminderPerFire(names: Record<string, string>, reminders: readonly Reminder[], keys: readonly string[], minFires = 0): Promise<void> {
  Object.assign(process.env, names);
  jest.resetModules();
  const flow = (await import('../fixtures/reminder-flow')).default;
  const states = new Map<string, { fires: number }>();
  for await (const k of inspectFlow(flow as never)) states.set(k.key, k.state as { fires: number });
  const byKey = new Map<string, number[]>();
  for (const o of reminders) byKey.set(o.key, [...(byKey.get(o.key) ?? []), o.fire]);
  for (const key of keys) {
    const fires = states.get(key)?.fires ?? 0;
    expect(fires).toBeGreaterThanOrEqual(minFires);
    expect({ key, reminders: (byKey.get(key) ?? []).sort((x, y) => x - y) }).toEqual({ key, reminders: Array.from({ length: fires }, (_, i) => i + 1) });
  }
}
