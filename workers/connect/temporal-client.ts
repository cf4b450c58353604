import { Client, Connection, type ConnectionOptions, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import { type Env, formatHostPort, readEnv } from '../../config/env';
import { readTemporalSecurity, type TemporalSecurity } from '../../config/security';
import { TemporalUnreachableError } from './errors';
import { temporalAuthFailure, temporalConnectOptions, temporalSessionFailure } from './temporal-tls';

export interface TemporalClientConnection {
  readonly address: string;
  readonly namespace: string;
  readonly connection: Connection;
  readonly client: Client;
  /** TEMPORAL_TLS_* / TEMPORAL_API_KEY, for the worker's native connections. */
  readonly security: TemporalSecurity;
  /** Closes the connection; a call still being retried then fails (CANCELLED) instead of throwing from its timer. */
  close(): Promise<void>;
}

type GrpcInterceptor = NonNullable<ConnectionOptions['interceptors']>[number];
type GrpcCall = ReturnType<GrpcInterceptor>;
/** gRPC's CANCELLED: the client's retry does not retry it. */
const CANCELLED = 1;

/**
 * The client's gRPC interceptors: Temporal's default retry, then a guard in front of the channel.
 * The retry runs from a timer: a call that failed while Temporal was unreachable is tried again up
 * to seconds later, and an attempt made after `connection.close()` throws "Channel has been shut
 * down" from that timer — an uncaught exception, which ended graceful stops whose revoke and
 * assignment signals were still being retried with exit 1 after "stopped". Once `closing` is set,
 * the guard ends every new attempt at once with CANCELLED instead: not retried, it rejects the
 * call's own promise, which its caller handles like any failed call.
 */
function closableInterceptors(): { interceptors: GrpcInterceptor[]; close: () => void } {
  let closing = false;
  const guard: GrpcInterceptor = (options, nextCall) => {
    // grpc-js only calls the interface of what an interceptor returns (InterceptingCall is one implementation).
    if (!closing) return nextCall(options) as GrpcCall;
    // The parts of grpc-js's InterceptingCall the client and the retry use: start, send, half-close.
    const ended = {
      start(metadata: unknown, listener?: { onReceiveMessage?: (m: unknown) => void; onReceiveStatus?: (s: unknown) => void }) {
        setImmediate(() => {
          listener?.onReceiveMessage?.(null); // a unary call that ends without a message, as grpc-js reports one
          listener?.onReceiveStatus?.({ code: CANCELLED, details: 'the Temporal client connection is closed', metadata });
        });
      },
      sendMessage() {},
      sendMessageWithContext() {},
      halfClose() {},
      startRead() {},
      cancelWithStatus() {},
      getPeer: () => '',
      getAuthContext: () => null,
    };
    return ended as unknown as GrpcCall;
  };
  return {
    interceptors: [makeGrpcRetryInterceptor(defaultGrpcRetryOptions()), guard],
    close: () => {
      closing = true;
    },
  };
}

/**
 * A client connection to TEMPORAL_ADDRESS that has answered once (so an unreachable server is a
 * TemporalUnreachableError now, not a hang later). Client SDK only: `status` answers without
 * loading the worker SDK.
 */
export async function connectTemporalClient(env: Env = readEnv(), security: TemporalSecurity = readTemporalSecurity()): Promise<TemporalClientConnection> {
  const address = formatHostPort(env.temporalAddress);
  const namespace = env.temporalNamespace;
  let connection: Connection;
  const guarded = closableInterceptors();
  try {
    connection = await Connection.connect({ address, connectTimeout: 5000, interceptors: guarded.interceptors, ...temporalConnectOptions(security) });
    await connection.workflowService.getSystemInfo({});
  } catch (err) {
    throw temporalAuthFailure(address, security, err) ?? (await temporalSessionFailure(env.temporalAddress, address, security, err)) ?? new TemporalUnreachableError(address, err);
  }
  const close = async () => {
    guarded.close();
    await connection.close();
  };
  return { address, namespace, connection, client: new Client({ connection, namespace }), security, close };
}
