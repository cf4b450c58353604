import { condition, continueAsNew, defineSignal, setHandler } from '@temporalio/workflow';

export const poke = defineSignal('poke');

/** Takes signals; continues as new every fifth, so new runs' first tasks reach any worker polling. */
export async function signalSink(): Promise<void> {
  let signals = 0;
  setHandler(poke, () => {
    signals++;
  });
  await condition(() => signals >= 5);
  await continueAsNew<typeof signalSink>();
}
