import { ConfigError } from './errors';

/**
 * Tracing (OpenTelemetry spans over OTLP/HTTP) from the standard OTEL_* environment variables.
 * Off unless asked for: an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or `OTEL_TRACES_EXPORTER=otlp`; `OTEL_TRACES_EXPORTER=none`
 * or `OTEL_SDK_DISABLED=true` turn it off whatever else is set. Off, the worker loads no
 * OpenTelemetry SDK at all. Pure: reads only the `env` it is given.
 *
 * The variables the SDK reads itself are left to it: `OTEL_EXPORTER_OTLP_HEADERS` (and `_TRACES_`),
 * `OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_TRACES_SAMPLER(_ARG)`, `OTEL_BSP_*`, `OTEL_RESOURCE_ATTRIBUTES`.
 */
export interface TracingConfig {
  /** The URL spans are POSTed to (`…/v1/traces` unless `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` names it whole). */
  readonly url: string;
  /** The OTLP/HTTP encoding: protobuf (the OTLP default) or JSON. */
  readonly protocol: TracingProtocol;
  /** `OTEL_SERVICE_NAME`; `kafka-flow-temporal` unless set (`OTEL_RESOURCE_ATTRIBUTES`' `service.name` also counts). */
  readonly serviceName: string;
}

export type TracingProtocol = 'http/protobuf' | 'http/json';

export const DEFAULT_SERVICE_NAME = 'kafka-flow-temporal';
/** The OTLP/HTTP default (a collector on this machine), when only `OTEL_TRACES_EXPORTER=otlp` is set. */
const DEFAULT_ENDPOINT = 'http://localhost:4318';
const PROTOCOLS: readonly string[] = ['http/protobuf', 'http/json'] satisfies TracingProtocol[];

/** The tracing configuration, or undefined when tracing is off. @throws ConfigError naming the variable */
export function readTracingEnv(env: NodeJS.ProcessEnv = process.env): TracingConfig | undefined {
  const value = (name: string) => {
    const v = env[name]?.trim();
    return v ? v : undefined;
  };
  const disabled = value('OTEL_SDK_DISABLED');
  if (disabled !== undefined && disabled.toLowerCase() === 'true') return undefined;

  const exporters = (value('OTEL_TRACES_EXPORTER') ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s.length > 0);
  const unsupported = exporters.filter((e) => e !== 'otlp' && e !== 'none');
  if (unsupported.length > 0) {
    throw new ConfigError(`OTEL_TRACES_EXPORTER=${JSON.stringify(env.OTEL_TRACES_EXPORTER)}: ${unsupported.join(', ')} is not supported (otlp or none)`);
  }
  if (exporters.includes('none')) return undefined;

  const tracesEndpoint = value('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const endpoint = value('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (!exporters.includes('otlp') && tracesEndpoint === undefined && endpoint === undefined) return undefined;

  const url =
    tracesEndpoint !== undefined
      ? httpUrl('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', tracesEndpoint)
      : // The general endpoint is a base: the signal's path is appended (the OTLP exporter spec).
        `${httpUrl('OTEL_EXPORTER_OTLP_ENDPOINT', endpoint ?? DEFAULT_ENDPOINT).replace(/\/+$/, '')}/v1/traces`;

  const protocolVar = value('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = (value(protocolVar) ?? 'http/protobuf').toLowerCase();
  if (!PROTOCOLS.includes(protocol)) {
    throw new ConfigError(`${protocolVar}=${JSON.stringify(env[protocolVar])}: must be http/protobuf or http/json (grpc is not supported: point it at the collector's OTLP/HTTP port, 4318 by default)`);
  }

  return {
    url,
    protocol: protocol as TracingProtocol,
    serviceName: value('OTEL_SERVICE_NAME') ?? serviceNameAttribute(value('OTEL_RESOURCE_ATTRIBUTES')) ?? DEFAULT_SERVICE_NAME,
  };
}

/** An absolute http(s) URL; anything else is a ConfigError naming the variable (its value may hold no secret: it is a URL without credentials). */
function httpUrl(name: string, raw: string): string {
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name}=${JSON.stringify(raw)}: not a URL (e.g. http://127.0.0.1:4318)`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ConfigError(`${name}=${JSON.stringify(raw)}: must be an http:// or https:// URL (OTLP over HTTP, e.g. http://127.0.0.1:4318)`);
  }
  if (parsed.username || parsed.password) {
    // Credentials go in OTEL_EXPORTER_OTLP_HEADERS, which is never logged; a URL is.
    throw new ConfigError(`${name}: must not carry credentials in the URL (use OTEL_EXPORTER_OTLP_HEADERS, e.g. Authorization=Bearer …)`);
  }
  return raw;
}

/** `service.name` of `OTEL_RESOURCE_ATTRIBUTES` (`key=value,…`, values percent-encoded). */
function serviceNameAttribute(raw: string | undefined): string | undefined {
  for (const pair of raw?.split(',') ?? []) {
    const at = pair.indexOf('=');
    if (at > 0 && pair.slice(0, at).trim() === 'service.name') {
      try {
        return decodeURIComponent(pair.slice(at + 1).trim()) || undefined;
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}
