// The activities are thin adapters over a PartitionHost (the interface a worker's FlowRuntime
// implements): here over a scripted host, in an activity context made by hand (no server).
import { ApplicationFailure, asyncLocalStorage, CancelledFailure, Context } from '@temporalio/activity';
import { createFlowActivities } from '../../../activities/flow-activities';
import { type FoldingHandle, type PartitionHost, StaleGenerationError } from '../../../activities/partition-host';
import { FailureTypes, type OwnerRequest, type PersistResult, type RecoverResult } from '../../../activities/types';
import { SnapshotWriteFencedError } from '../../../core/fence-errors';
import { PersistFailedError } from '../../../flow/errors';

const owner = { generation: 3, memberId: 'm-1', taskQueue: 'tq-1' };
const request: OwnerRequest = { flow: 'sales', topic: 'orders', partition: 0, owner };
const recovered: RecoverResult = { fromMemory: false, keys: 2, snapshotsRead: 2, ms: 1, committedOffset: '10' };
const persisted: PersistResult = { persistedKeys: 1, deletedKeys: 0, liveKeys: 2, ms: 1, at: 0 };

/** A host whose answers a test scripts; it records what the activities asked. */
function host(overrides: Partial<PartitionHost> = {}): PartitionHost & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    activity: async (fn) => {
      calls.push('activity');
      return fn();
    },
    recover: async () => recovered,
    startFolding: () => ({ token: 1, poll: () => ({ running: false, progress: {} }), foldNext: async () => false }),
    stopFolding: (_r, token) => {
      calls.push(`stopFolding ${token}`);
    },
    persistReadiness: () => 'persist',
    persist: async () => persisted,
    ...overrides,
  };
}

/** Runs `fn` as an activity would run (Context.current() works), recording heartbeats. */
function inActivity<T>(fn: () => Promise<T>, heartbeats: unknown[] = [], abort = new AbortController()): Promise<T> {
  const cancelled = new Promise<never>((_, reject) => abort.signal.addEventListener('abort', () => reject(new CancelledFailure('CANCELLED'))));
  cancelled.catch(() => undefined);
  const Ctor = Context as unknown as new (...args: unknown[]) => Context;
  const ctx = new Ctor({}, cancelled, abort.signal, (d: unknown) => heartbeats.push(d), undefined, undefined, undefined, {});
  return asyncLocalStorage.run(ctx, fn);
}

async function failureOf(p: Promise<unknown>): Promise<ApplicationFailure> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ApplicationFailure);
    return err as ApplicationFailure;
  }
  throw new Error('expected the activity to fail');
}

describe('flow activities over a PartitionHost', () => {
  test('recover runs inside the host activity, heartbeating, and returns what the host recovered', async () => {
    const h = host();
    const heartbeats: unknown[] = [];
    const result = await inActivity(() => createFlowActivities(new Map([['sales', h]])).recover(request), heartbeats);
    expect(result).toEqual(recovered);
    expect(h.calls).toEqual(['activity']);
    expect(heartbeats).toContainEqual({ phase: 'recovering' });
  });

  test('a flow that does not run in this process, a stale generation and a fence are non-retryable failures of their type', async () => {
    const activities = createFlowActivities(
      new Map<string, PartitionHost>([
        ['stale', host({ recover: async () => Promise.reject(new StaleGenerationError('not ours')) })],
        ['fenced', host({ recover: async () => Promise.reject(new SnapshotWriteFencedError('orders', 0, 'newer producer', { reason: 'producer-epoch' })) })],
      ]),
    );
    const unknown = await failureOf(inActivity(() => activities.recover({ ...request, flow: 'other' })));
    expect([unknown.type, unknown.nonRetryable]).toEqual([FailureTypes.staleGeneration, true]);
    const stale = await failureOf(inActivity(() => activities.recover({ ...request, flow: 'stale' })));
    expect([stale.type, stale.nonRetryable]).toEqual([FailureTypes.staleGeneration, true]);
    const fenced = await failureOf(inActivity(() => activities.recover({ ...request, flow: 'fenced' })));
    expect([fenced.type, fenced.nonRetryable]).toEqual([FailureTypes.fenced, true]);
  });

  test('the fold loop folds what the consumer hands it until the partition stops running here, then lets it go with its token', async () => {
    let polls = 0;
    const waits: number[] = [];
    const folding: FoldingHandle = {
      token: 7,
      poll: () => ({ running: ++polls < 3, progress: { polls } }),
      foldNext: async (waitMs) => {
        waits.push(waitMs);
        return true;
      },
    };
    const h = host({ startFolding: () => folding });
    const heartbeats: unknown[] = [];
    await inActivity(() => createFlowActivities(new Map([['sales', h]])).foldLoop(request), heartbeats);
    expect(polls).toBe(3);
    expect(waits).toEqual([250, 250]);
    // Heartbeats at most every 250 ms, not per batch.
    expect(heartbeats).toEqual([{ polls: 1 }]);
    expect(h.calls).toEqual(['activity', 'stopFolding 7']);
  });

  test('a cancelled fold loop (a newer owner, a revoke) ends with the cancellation, waking from its wait for a batch', async () => {
    const abort = new AbortController();
    const folding: FoldingHandle = {
      token: 5,
      poll: () => ({ running: true, progress: {} }),
      foldNext: (_waitMs, signal) =>
        new Promise((resolve) => {
          signal?.addEventListener('abort', () => resolve(false));
          setTimeout(() => abort.abort(), 5);
        }),
    };
    const h = host({ startFolding: () => folding });
    await expect(inActivity(() => createFlowActivities(new Map([['sales', h]])).foldLoop(request), [], abort)).rejects.toBeInstanceOf(CancelledFailure);
    expect(h.calls).toEqual(['activity', 'stopFolding 5']);
  });

  test('a fold loop scheduled with its recovery waits for it (heartbeating) before folding; ends if it never comes; a stale generation fails it', async () => {
    const answers: Array<'waiting' | 'done' | 'ended'> = ['waiting', 'waiting', 'done'];
    const h = host({
      recoveryDone: (r) => {
        h.calls.push(`recoveryDone ${r.afterRecovery}`);
        return answers.shift()!;
      },
      startFolding: () => {
        h.calls.push('startFolding');
        return { token: 4, poll: () => ({ running: false, progress: {} }), foldNext: async () => false };
      },
    });
    const heartbeats: unknown[] = [];
    await inActivity(() => createFlowActivities(new Map([['sales', h]])).foldLoop({ ...request, afterRecovery: 'run/1' }), heartbeats);
    expect(h.calls).toEqual(['activity', 'recoveryDone run/1', 'recoveryDone run/1', 'recoveryDone run/1', 'startFolding', 'stopFolding 4']);
    expect(heartbeats).toEqual([{ phase: 'awaiting recovery' }, { phase: 'awaiting recovery' }]);

    const ended = host({ recoveryDone: () => 'ended', startFolding: () => { throw new Error('must not fold'); } });
    await inActivity(() => createFlowActivities(new Map([['sales', ended]])).foldLoop({ ...request, afterRecovery: 'run/1' }));
    expect(ended.calls).toEqual(['activity']);

    const stale = host({ recoveryDone: () => { throw new StaleGenerationError('not ours'); } });
    const f = await failureOf(inActivity(() => createFlowActivities(new Map([['sales', stale]])).foldLoop({ ...request, afterRecovery: 'run/1' })));
    expect([f.type, f.nonRetryable]).toEqual([FailureTypes.staleGeneration, true]);

    // Without a recovery to wait for (an earlier workflow), it folds at once as before.
    const plain = host({ recoveryDone: () => { throw new Error('not asked'); } });
    await inActivity(() => createFlowActivities(new Map([['sales', plain]])).foldLoop(request));
    expect(plain.calls).toEqual(['activity', 'stopFolding 1']);
  });

  test('a partition that stopped here ends the fold loop with a persist failure (the workflow retries it)', async () => {
    const failure = new PersistFailedError('orders', 0, 1, new Error('broker down'));
    const h = host({ startFolding: () => ({ token: 2, poll: () => ({ running: true, failure, progress: {} }), foldNext: async () => false }) });
    const f = await failureOf(inActivity(() => createFlowActivities(new Map([['sales', h]])).foldLoop(request)));
    expect([f.type, f.nonRetryable]).toEqual([FailureTypes.persistFailed, true]);
    expect(h.calls).toEqual(['activity', 'stopFolding 2']);
  });

  test('persist reports what the host persisted once due; a partition revoked here (skip) reports nothing', async () => {
    const activities = createFlowActivities(
      new Map<string, PartitionHost>([
        ['sales', host()],
        ['revoked', host({ persistReadiness: () => 'skip', persist: async () => Promise.reject(new Error('must not persist')) })],
      ]),
    );
    const due = { ...request, delayMs: 0, reason: 'timer' as const };
    await expect(inActivity(() => activities.persist(due))).resolves.toEqual(persisted);
    await expect(inActivity(() => activities.persist({ ...due, flow: 'revoked' }))).resolves.toMatchObject({ persistedKeys: 0, skipped: true });
  });
});
