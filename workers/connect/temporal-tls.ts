/**
 * TEMPORAL_TLS_* and TEMPORAL_API_KEY (parsed in config/security) as the connection options of
 * both SDK connections: the client's `Connection.connect` and the worker's
 * `NativeConnection.connect` take the same `tls` and `apiKey` shapes.
 */
import type { TLSConfig } from '@temporalio/client';
import { probeHttp2, probeTls } from '../../config/net';
import type { TemporalSecurity } from '../../config/security';
import { TemporalAuthenticationError } from './auth-errors';

export interface TemporalConnectOptions {
  tls?: TLSConfig;
  apiKey?: string;
}

export function temporalConnectOptions(security: TemporalSecurity | undefined): TemporalConnectOptions {
  const t = security?.tls;
  if (!t) return {};
  const tls: TLSConfig = {
    ...(t.ca ? { serverRootCACertificate: t.ca.pem } : {}),
    ...(t.cert && t.key ? { clientCertPair: { crt: t.cert.pem, key: t.key.pem } } : {}),
    ...(t.serverName ? { serverNameOverride: t.serverName } : {}),
  };
  return { tls, ...(security?.apiKey ? { apiKey: security.apiKey.reveal() } : {}) };
}

function messages(err: unknown): string {
  const parts: string[] = [];
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 10; e = (e as { cause?: unknown }).cause, depth++) {
    parts.push(e instanceof Error ? `${e.name} ${e.message} ${(e as { details?: unknown }).details ?? ''}` : String(e));
  }
  return parts.join(' | ');
}

const GRPC_UNAUTHENTICATED = 16;
const GRPC_PERMISSION_DENIED = 7;

/**
 * A connect or first-call failure as the typed error to show: TemporalAuthenticationError when the
 * server refused the credentials or the TLS handshake failed (naming the variables to check),
 * undefined otherwise (the caller reports it as unreachable).
 */
export function temporalAuthFailure(address: string, security: TemporalSecurity | undefined, err: unknown): TemporalAuthenticationError | undefined {
  const text = messages(err);
  const code = (err as { code?: unknown } | null)?.code;
  const tlsVars = [
    'TEMPORAL_TLS_SERVER_CA_CERT_PATH',
    ...(security?.tls?.cert ? ['TEMPORAL_TLS_CLIENT_CERT_PATH', 'TEMPORAL_TLS_CLIENT_KEY_PATH'] : []),
    ...(security?.tls?.serverName ? ['TEMPORAL_TLS_SERVER_NAME'] : []),
  ];
  if (code === GRPC_UNAUTHENTICATED || code === GRPC_PERMISSION_DENIED || /unauthenticated|permission denied|invalid api key|unauthorized|valid authentication credentials/i.test(text)) {
    const vars = security?.apiKey ? ['TEMPORAL_API_KEY'] : security?.tls?.cert ? ['TEMPORAL_TLS_CLIENT_CERT_PATH', 'TEMPORAL_TLS_CLIENT_KEY_PATH'] : ['TEMPORAL_API_KEY', 'TEMPORAL_TLS_CLIENT_CERT_PATH'];
    return new TemporalAuthenticationError(address, vars, 'refused the credentials', err);
  }
  if (/certificate|handshake|\bssl\b|\btls\b|alert|wrong version number|unknown ca|bad.?cert|InvalidCertificate|UnknownIssuer|NotValidForName/i.test(text)) {
    if (!security?.tls) return new TemporalAuthenticationError(address, ['TEMPORAL_TLS'], 'expects TLS (the plaintext connection failed)', err);
    return new TemporalAuthenticationError(address, tlsVars, 'failed the TLS handshake', err);
  }
  return undefined;
}

/**
 * grpc-js reports a failed TLS session only as "Failed to connect before the deadline". When the
 * port accepts TCP connections and answers an HTTP/2 preface as the other kind of server would (a
 * TLS server when we speak plaintext; anything when we speak TLS: a plaintext gRPC server, or a TLS
 * one whose certificate we do not trust), that is a security mismatch, not an absent server. A
 * port that accepts but says nothing (a stalled server, a cut-off network path) is unreachable, so
 * is one that closes every connection without answering a TLS handshake either (a proxy or load
 * balancer with nothing behind it), and so is a plaintext gRPC server answering a plaintext client
 * (the failure was passing).
 */
export async function temporalSessionFailure(
  address: { host: string; port: number },
  shown: string,
  security: TemporalSecurity | undefined,
  err: unknown,
): Promise<TemporalAuthenticationError | undefined> {
  if (!/before the deadline/i.test(messages(err))) return undefined;
  const answer = await probeHttp2(address.host, address.port, 2000);
  if (answer === 'refused' || answer === 'silent' || (answer === 'h2' && !security?.tls)) return undefined;
  // Closed without a byte: a TLS server dropping a plaintext client, or a proxy or load balancer
  // dropping every connection (nothing behind it, a cut-off path). Only a TLS server answers a handshake.
  if (answer === 'closed' && (await probeTls(address.host, address.port, 2000)) !== 'tls') return undefined;
  return security?.tls
    ? new TemporalAuthenticationError(shown, ['TEMPORAL_TLS_SERVER_CA_CERT_PATH', 'TEMPORAL_TLS_SERVER_NAME'], 'accepts connections but the TLS session failed (an untrusted server certificate, or a plaintext port?)', err)
    : new TemporalAuthenticationError(shown, ['TEMPORAL_TLS'], 'accepts connections but no plaintext gRPC session (does it expect TLS?)', err);
}
