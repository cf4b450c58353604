// Cassandra down mid-run, on a private Cassandra this test starts, stops and starts again (the
// shared server is never touched): a persist fails with a clear error, no offset is committed
// past what was written, and once Cassandra is back processing resumes with nothing lost — in
// the same flow with ignorePersistErrors, and through the next assignment's recovery without.
import { PersistFailedError } from '../../../flow/errors';
import { CassandraBackend, CassandraPersistenceError } from '../../../persistence/cassandra';
import { InMemoryOffsetCommitter } from '../../../persistence/memory';
import { expectedTallies, privateNodeBackend, recoverStates, roundRobin, step, type Tally, tallyFlow } from './support';

describe('Cassandra down mid-run (a private Cassandra)', () => {
  // The backend's default reconnection policy (capped at 2 s) is under test here.
  const node = privateNodeBackend('outage');

  it('fails the persist clearly, commits nothing past the writes, resumes with nothing lost', async () => {
    const started = Date.now();
    const { cassandra, backend } = await node.start();
    const group = new InMemoryOffsetCommitter();
    const strictP = { topic: 'orders', partition: 0 };
    const lenientP = { topic: 'orders', partition: 1 };
    const input = roundRobin(20, 0, 250);
    const strict = tallyFlow(await backend.forPartition({ ...strictP, generation: 1, committer: group }), '0', strictP);
    const lenient = tallyFlow(await backend.forPartition({ ...lenientP, generation: 1, committer: group }), '0', {
      ...lenientP,
      ignorePersistErrors: true,
    });
    await strict.flow.recover();
    await lenient.flow.recover();
    await step(strict.flow, strict.clock, input.slice(0, 100));
    await step(lenient.flow, lenient.clock, input.slice(0, 100));
    expect(group.committed(strictP)).toBe(100);
    expect(group.committed(lenientP)).toBe(100);

    await cassandra.down();
    const downAt = Date.now();

    // Without ignorePersistErrors the persist throws and the partition stops.
    const failed = await step(strict.flow, strict.clock, input.slice(100, 200)).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(PersistFailedError);
    const cause = (failed as PersistFailedError).cause;
    expect(cause).toBeInstanceOf(CassandraPersistenceError);
    expect((cause as Error).message).toMatch(
      new RegExp(`snapshot write on table kft_outage_\\w+\\.snapshots_v2 for topic "orders" partition 0 \\(20 key\\(s\\).*failed: .*(no Cassandra node answered at ${cassandra.contactPoint}|timed out)`),
    );
    expect(strict.flow.failed).toBe(failed);
    // With it, the keys keep holding their offsets: failed writes, no commit, processing goes on.
    const held = await step(lenient.flow, lenient.clock, input.slice(100, 200));
    expect(held).toMatchObject({ written: 0, failed: 20, committed: undefined });
    expect(await step(lenient.flow, lenient.clock, input.slice(200, 250))).toMatchObject({ written: 0, committed: undefined });
    expect(group.committed(strictP)).toBe(100);
    expect(group.committed(lenientP)).toBe(100);

    // An outage longer than the driver's default schedule reaches in 16 s (1 + 2 + 4 + 8 s): with
    // it the next attempt would come up to 16 s after Cassandra is back (at 31 s); with the
    // backend's (capped at 2 s) within about 2 s.
    await new Promise((r) => setTimeout(r, Math.max(0, downAt + 8_000 - Date.now())));
    await cassandra.up();
    const upAt = Date.now();

    // The same flow catches up once the driver has reconnected (bounded: 30 s, 200 persists).
    const deadline = Date.now() + 30_000;
    let attempts = 0;
    while (group.committed(lenientP) !== 250 && Date.now() < deadline && attempts++ < 200) {
      await step(lenient.flow, lenient.clock, []);
      if (group.committed(lenientP) !== 250) await new Promise((r) => setTimeout(r, 150));
    }
    const caughtUpMs = Date.now() - upAt;
    process.stderr.write(`cassandra outage test: down ${Math.round((upAt - downAt) / 1000)} s, caught up ${caughtUpMs} ms after it was back\n`);
    expect(group.committed(lenientP)).toBe(250);
    expect(caughtUpMs).toBeLessThan(5_000);
    expect(lenient.flow.failed).toBeUndefined();

    // The stopped partition's next assignment recovers what was written and replays from the commit.
    const next = tallyFlow(await backend.forPartition({ ...strictP, generation: 2, committer: group }), String(group.committed(strictP)), strictP);
    expect(await next.flow.recover()).toBe(20);
    await step(next.flow, next.clock, input.slice(100, 200));
    expect(group.committed(strictP)).toBe(200);

    // Nothing lost: fresh recoveries hold exactly the fold of every record.
    const states = async (p: typeof strictP) =>
      new Map([...(await recoverStates(await backend.forPartition({ ...p, generation: 3, committer: group })))].map(([k, v]) => [k, v.state]));
    expect(await states(strictP)).toEqual(expectedTallies(input.slice(0, 200)));
    expect(await states(lenientP)).toEqual(expectedTallies(input));
    process.stderr.write(`cassandra outage test: ${Math.round((Date.now() - started) / 1000)} s (two starts and two stops of a private Cassandra)\n`);
  }, 150_000);

  it('a recovery whose reads time out on a frozen node reads them again, fewer at once, and recovers every key once it thaws', async () => {
    const { cassandra, backend } = await node.start();
    const P = { topic: 'frozen', partition: 0 };
    const input = roundRobin(40, 0, 200);
    const writer = tallyFlow(await backend.forPartition({ ...P, generation: 1, committer: new InMemoryOffsetCommitter() }), '0', P);
    await writer.flow.recover();
    await step(writer.flow, writer.clock, input);
    // A reader on its own client whose reads time out after 1 s (the driver's default is 12 s).
    const reader = await CassandraBackend.start<Tally, number>({
      applicationId: 'app',
      groupId: 'group',
      keyspace: backend.settings.keyspace,
      contactPoints: [cassandra.contactPoint],
      clientOptions: { socketOptions: { connectTimeout: 1000, readTimeout: 1000 } },
    });
    try {
      const persistence = await reader.forPartition({ ...P, generation: 2, committer: new InMemoryOffsetCommitter() });
      cassandra.pause();
      let resumed = false;
      try {
        const recovering = recoverStates(persistence);
        await new Promise((r) => setTimeout(r, 3_000));
        cassandra.resume();
        resumed = true;
        const recovered = await recovering;
        expect(new Map([...recovered].map(([k, v]) => [k, v.state]))).toEqual(expectedTallies(input));
      } finally {
        if (!resumed) cassandra.resume();
      }
      // The timeouts lowered the reads at once (64 by default); successes raise it again.
      expect(reader.session.reads.limit).toBeLessThan(64);
    } finally {
      await reader.close();
    }
  }, 60_000);
});
