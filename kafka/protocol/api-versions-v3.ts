/**
 * ApiVersions v3 (KIP-511, KIP-584), which kafkajs 2.2.4 lacks (it stops at v2); the patch registers
 * it as version 3 of its ApiVersions request, calling `apiVersionsV3` here. kafkajs sends
 * ApiVersions first on every connection; what v3 adds for us is the cluster's finalized features,
 * among them `transaction.version`, which says whether the brokers speak transaction version 2
 * (KIP-890 part 2: Produce v12 and TxnOffsetCommit v5 register partitions implicitly, EndTxn v5
 * bumps the producer epoch every transaction) — kafka/transaction-version.ts decides from it.
 *
 * Request (Version: 3) => client_software_name client_software_version TAG_BUFFER
 *   client_software_name => COMPACT_STRING
 *   client_software_version => COMPACT_STRING
 *
 * Response (Version: 3) => error_code [api_keys] throttle_time_ms TAG_BUFFER
 *   error_code => INT16
 *   api_keys => api_key min_version max_version TAG_BUFFER
 *     api_key => INT16
 *     min_version => INT16
 *     max_version => INT16
 *   throttle_time_ms => INT32
 *   tagged fields: 0 supported_features, 1 finalized_features_epoch (INT64),
 *     2 finalized_features => [name max_version_level min_version_level TAG_BUFFER]
 *       name => COMPACT_STRING
 *       max_version_level => INT16
 *       min_version_level => INT16
 *     3 zk_migration_ready (BOOLEAN)
 *
 * Unlike every other flexible API, ApiVersions is answered with response header v0 (no tag buffer:
 * a client must read the answer before it knows the broker's versions), and a broker that does not
 * support v3 answers with a v0 body carrying UNSUPPORTED_VERSION (35), on which kafkajs tries v2.
 * The request's header is v2 (flexibleRequest). The software name and version must match
 * `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?` or the broker answers INVALID_REQUEST.
 */
import { flexibleRequest, readStructs } from './flexible';
import { API_KEYS, Decoder, failIfVersionNotSupported, type KafkajsProtocol, type KafkajsRequest, parseApiVersions } from './kafkajs-protocol';

export const CLIENT_SOFTWARE_NAME = 'kafka-flow-temporal';
export const CLIENT_SOFTWARE_VERSION = '0.1.0';

export interface ApiVersionsV3Response {
  errorCode: number;
  apiVersions: Array<{ apiKey: number; minVersion: number; maxVersion: number }>;
  /** 0: the broker's throttle time is in `clientSideThrottleTime` (kafkajs's convention from v2 on). */
  throttleTime: 0;
  clientSideThrottleTime: number;
  /** The cluster's finalized feature levels by name (`transaction.version`, `metadata.version`, …); a feature at level 0 may be absent. */
  finalizedFeatures: Record<string, number>;
}

const FINALIZED_FEATURES_TAG = 2;

export function apiVersionsV3Request(): KafkajsRequest {
  return flexibleRequest({ apiKey: API_KEYS.ApiVersions, apiVersion: 3, apiName: 'ApiVersions' }, (encoder) =>
    encoder.writeUVarIntString(CLIENT_SOFTWARE_NAME).writeUVarIntString(CLIENT_SOFTWARE_VERSION).writeUVarInt(0),
  );
}

export async function decodeApiVersionsV3Response(raw: Buffer): Promise<ApiVersionsV3Response> {
  const decoder = new Decoder(raw); // response header v0: nothing to skip
  const errorCode = decoder.readInt16();
  failIfVersionNotSupported(errorCode); // the rest is then a v0 body, which kafkajs reads with v2
  const apiVersions = readStructs(decoder, (d) => ({ apiKey: d.readInt16(), minVersion: d.readInt16(), maxVersion: d.readInt16() }));
  const throttleTime = decoder.readInt32();
  const finalizedFeatures: Record<string, number> = {};
  const tagged = decoder.readTaggedFields();
  const finalized = tagged?.[FINALIZED_FEATURES_TAG];
  if (finalized) {
    const features = readStructs(new Decoder(finalized), (d) => ({ name: d.readUVarIntString(), maxLevel: d.readInt16(), minLevel: d.readInt16() }));
    for (const { name, maxLevel } of features) if (name !== null) finalizedFeatures[name] = maxLevel;
  }
  return { errorCode, apiVersions, throttleTime: 0, clientSideThrottleTime: throttleTime, finalizedFeatures };
}

/** Version 3 of kafkajs's ApiVersions: the request and how to read its answer. */
export function apiVersionsV3(): KafkajsProtocol<ApiVersionsV3Response> {
  return {
    request: apiVersionsV3Request(),
    response: { decode: decodeApiVersionsV3Response, parse: parseApiVersions },
  };
}
