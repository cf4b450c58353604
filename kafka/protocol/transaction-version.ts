/**
 * Whether a broker speaks transaction version 2 (KIP-890 part 2): its cluster finalizes the feature
 * `transaction.version` at 2 or more (ApiVersions v3's finalized features, which the patched
 * kafkajs keeps on the versions object as `finalizedFeatures`) and it takes the requests that
 * protocol sends: Produce v12, TxnOffsetCommit v5 and EndTxn v5. The patched kafkajs's transaction
 * manager decides by it (the `speaksTransactionVersion2` hook), and so does the check of a required
 * version 2 at a writer's first producer (kafka/broker-versions.ts).
 */
import { API_KEYS } from './kafkajs-protocol';

export const TRANSACTION_VERSION_FEATURE = 'transaction.version';

/** Produce, EndTxn and TxnOffsetCommit, and the versions transaction version 2 sends. */
export const TRANSACTION_VERSION_2_REQUESTS: ReadonlyArray<{ apiKey: number; name: string; version: number }> = [
  { apiKey: API_KEYS.Produce, name: 'Produce', version: 12 },
  { apiKey: API_KEYS.EndTxn, name: 'EndTxn', version: 5 },
  { apiKey: API_KEYS.TxnOffsetCommit, name: 'TxnOffsetCommit', version: 5 },
];

export type VersionsWithFeatures = Record<number, { minVersion: number; maxVersion: number } | undefined> & {
  readonly finalizedFeatures?: Readonly<Record<string, number>>;
};

/** The cluster's finalized `transaction.version` (0 when absent: not finalized, or ApiVersions before v3). */
export function finalizedTransactionVersion(versions: VersionsWithFeatures | undefined): number {
  return versions?.finalizedFeatures?.[TRANSACTION_VERSION_FEATURE] ?? 0;
}

/** What a broker lacks for transaction version 2: [] when it speaks it. */
export function transactionVersion2Missing(versions: VersionsWithFeatures | undefined): string[] {
  const missing: string[] = [];
  const level = finalizedTransactionVersion(versions);
  if (level < 2) missing.push(`${TRANSACTION_VERSION_FEATURE} finalized at ${level}`);
  for (const { apiKey, name, version } of TRANSACTION_VERSION_2_REQUESTS) {
    const v = versions?.[apiKey];
    if (!v || v.maxVersion < version || v.minVersion > version) missing.push(`${name} v${version}`);
  }
  return missing;
}

export function speaksTransactionVersion2(versions: VersionsWithFeatures | undefined): boolean {
  return transactionVersion2Missing(versions).length === 0;
}
