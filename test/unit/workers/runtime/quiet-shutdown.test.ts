import { untilWorkflowWorkerQuiet } from '../../../../workers/runtime/quiet-shutdown';

/** A worker whose in-flight workflow activations follow `busy(msSinceStart)`. */
const probe = (busy: (ms: number) => number) => {
  const started = Date.now();
  return { getStatus: () => ({ numInFlightWorkflowActivations: busy(Date.now() - started) }) };
};

describe('untilWorkflowWorkerQuiet', () => {
  test('an idle worker is quiet after quietMs', async () => {
    const t0 = Date.now();
    expect(await untilWorkflowWorkerQuiet(probe(() => 0), { quietMs: 40, timeoutMs: 1_000, pollMs: 2 })).toBe(true);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(40);
  });

  test('the quiet time counts from the last activation seen', async () => {
    let lastBusyRead = 0;
    const busy = probe((ms) => {
      if (ms >= 100) return 0;
      lastBusyRead = Date.now();
      return 1;
    });
    expect(await untilWorkflowWorkerQuiet(busy, { quietMs: 50, timeoutMs: 1_000, pollMs: 2 })).toBe(true);
    expect(lastBusyRead).toBeGreaterThan(0);
    expect(Date.now() - lastBusyRead).toBeGreaterThanOrEqual(50);
  });

  test('a worker never quiet is given up on at timeoutMs', async () => {
    const t0 = Date.now();
    expect(await untilWorkflowWorkerQuiet(probe(() => 2), { quietMs: 20, timeoutMs: 120, pollMs: 2 })).toBe(false);
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(120);
    expect(took).toBeLessThan(1_000);
  });
});
