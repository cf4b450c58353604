import type { KafkaClient } from '../../../kafka/client';
import type { ReadRecord } from '../../../kafka';
import { waitFor } from '../../support/servers';
import { countBySource, dedupeBySource, emittingFold, events, Owner, type OwnerOptions, produce, textOutputs } from './harness';

/**
 * The story the outputs tests (issue 15) tell with each persistence, on one input partition where
 * key `k` emits one output per record (its value) and key `quiet` emits nothing and holds the
 * committed offset at 0 throughout:
 *
 * - A (flush on revoke): `quiet` at offset 0, k's e1..e3 at 1..3, emitted and produced by an
 *   outputs persist (with k's snapshot @3); then A folds e4..e6 (outputs pending in its memory) and
 *   freezes inside eachBatch: evicted.
 * - B takes over from the committed offset 0: k's snapshot @3 skips e1..e3 (no re-emit); B folds
 *   e4..e7 and produces their outputs with k's snapshot @7; then folds e8 and keeps its output in
 *   memory.
 * - A wakes up and flushes on revoke with e4..e6's outputs — what the persistence makes of that is
 *   `staleFlushed`'s to check — and stops; B stops without a flush: e8's output is lost with it.
 * - C recovers from the committed offset 0 and folds up to e8.
 *
 * Returns A (its `revokes`) and C (to persist and check what it emits).
 */
export async function staleAndLostOwners(o: {
  client: KafkaClient;
  input: string;
  owner: (name: 'A' | 'B' | 'C', flushOnRevoke: boolean) => Owner | Promise<Owner>;
  /** A has recovered the partition, before any record (e.g. the output topic now exists). */
  recovered?: (a: Owner) => Promise<void>;
  /** A's flush on revoke has run; before A stops. */
  staleFlushed: (a: Owner) => Promise<void>;
}): Promise<{ a: Owner; c: Owner }> {
  const { client, input } = o;
  const a = await o.owner('A', true);
  await a.start();
  const genA = await a.owns();
  await a.recover();
  await o.recovered?.(a);
  await produce(client, input, 'quiet', ['q1']);
  await produce(client, input, 'k', events(1, 3));
  await a.folded(4);
  expect(a.flow!.outputsDue(Date.now() + 1000)).toBe(true);
  expect(await a.flow!.persist(Date.now(), 'outputs')).toMatchObject({ written: 1, outputs: 3, committed: undefined });

  await produce(client, input, 'k', events(4, 5));
  await a.folded(6);
  a.freeze();
  await produce(client, input, 'k', events(6, 6));
  await waitFor('A to freeze after folding e6', () => a.stuck);

  const b = await o.owner('B', false);
  await b.start();
  await b.owns(30_000, genA);
  await b.recover();
  await produce(client, input, 'k', events(7, 7));
  await b.folded(8);
  expect(b.flow!.stateOf('k')).toEqual({ events: events(1, 7) });
  expect(await b.flow!.persist(Date.now(), 'outputs')).toMatchObject({ written: 1, outputs: 4 });
  await produce(client, input, 'k', events(8, 8));
  await b.folded(9);

  a.thaw();
  await waitFor("A's flush on revoke", () => a.revokes.length > 0, 30_000);
  await o.staleFlushed(a);
  await a.stop();
  await b.stop();

  const c = await o.owner('C', false);
  await c.start();
  await c.owns();
  await c.recover();
  await c.folded(9);
  expect(c.flow!.stateOf('k')).toEqual({ events: events(1, 8) });
  return { a, c };
}

/**
 * An owner of the story: key `k` emits one output per record (its value) to `output`, key `quiet`
 * emits nothing; it persists to the Kafka snapshot backend (`backend`) or elsewhere (`persistence`).
 */
export function emittingOwner(
  o: { client: KafkaClient; groupId: string; input: string; output: string },
  name: string,
  flushOnRevoke: boolean,
  persistTo: Pick<OwnerOptions, 'backend' | 'persistence'>,
): Owner {
  return new Owner({ ...o, name, flushOnRevoke, fold: emittingFold(o.output), outputs: textOutputs(o.output), ...persistTo });
}

/**
 * At least once, exact after deduplication: deduplicated by `kafka-flow-source`, the outputs are
 * k's e1..e8, one per source record (every copy of a source the same value), and `copies(n)` copies
 * of e<n>'s output landed.
 */
export function expectOutputsAtLeastOnce(got: readonly ReadRecord[], input: string, copies: (n: number) => number): void {
  const expected = events(1, 8).map((value, i) => ({ source: `${input}/0/${i + 1}/0`, value }));
  expect(dedupeBySource(got)).toEqual(expected);
  expect(countBySource(got)).toEqual(Object.fromEntries(expected.map((e, i) => [e.source, copies(i + 1)])));
}
