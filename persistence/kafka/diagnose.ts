import type { StallCause, StallObservation } from './errors';

export interface StallDiagnosis {
  readonly cause: StallCause;
  readonly explanation: string;
}

/**
 * Why a recovery read stopped at `position`, short of `bound`, from offsets re-read at the
 * deadline. The log end below the bound (or below where we already read) means records we were
 * promised are gone: truncation. The log end still covering the bound while the last stable offset
 * sits at or below the position means an open transaction pins the read: it outlived the deadline.
 * A failed re-read, or anything else, is undetermined — never guessed.
 */
export function diagnoseStall(o: StallObservation): StallDiagnosis {
  if (o.logEnd === undefined) {
    const why = o.reReadError instanceof Error ? o.reReadError.message : String(o.reReadError ?? 'no answer');
    return {
      cause: 'undetermined',
      explanation:
        `the log end could not be re-read (${why}); check the brokers' UncleanLeaderElectionsPerSec ` +
        '(truncation) and PartitionsWithLateTransactionsCount (hanging transactions)',
    };
  }
  const logEnd = BigInt(o.logEnd);
  const bound = BigInt(o.bound);
  const position = BigInt(o.position);
  if (logEnd < bound || logEnd < position) {
    return {
      cause: 'truncation',
      explanation:
        `the log end regressed to ${o.logEnd}, below the bound ${o.bound} captured before the read` +
        (logEnd < position ? ` and below the position ${o.position} already read` : '') +
        ': acknowledged snapshot records were lost (an unclean leader election or an equivalent disaster). ' +
        'Recovering from what is left would load stale state: restore the records or decide on an offset reset',
    };
  }
  if (o.lastStable !== undefined && BigInt(o.lastStable) <= position) {
    const pinning = o.openTransactions?.find((t) => t.startOffset === o.lastStable);
    const holder = pinning
      ? ` It is producer ${pinning.producerId}'s (epoch ${pinning.producerEpoch}), open since offset ${pinning.startOffset}; if it is ` +
        `hanging, abort it: kafka-transactions.sh --bootstrap-server <broker> abort --topic ${o.topic} --partition ${o.partition} ` +
        `--start-offset ${pinning.startOffset}.`
      : '';
    return {
      cause: 'outlived-transaction',
      explanation:
        `the log end ${o.logEnd} still covers the bound, but the last stable offset ${o.lastStable} pins the read: ` +
        'an open transaction outlived the deadline. One whose producer has a transaction.timeout.ms above ' +
        'recoveryStallTimeout heals once the broker aborts it; a hanging one never does: find and abort it with ' +
        'kafka-transactions.sh (KIP-664). The snapshot topic must be written by this flow only.' +
        holder +
        " (The partition's own producer's hanging transactions are ended at its fence where the broker allows it.)",
    };
  }
  return {
    cause: 'undetermined',
    explanation:
      `the log end ${o.logEnd} covers the bound and the last stable offset ${o.lastStable ?? 'unknown'} does not pin ` +
      `the position ${o.position}; the fetches themselves make no progress (a log start moved past the position, ` +
      'or the partition is unavailable): check the brokers',
  };
}
