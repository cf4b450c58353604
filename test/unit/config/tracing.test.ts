import { readWorkerEnv } from '../../../config/env';
import { ConfigError } from '../../../config/errors';
import { readTracingEnv } from '../../../config/tracing';

describe('tracing from the OTEL_* variables', () => {
  test('off when nothing asks for it, and the worker reads it so', () => {
    expect(readTracingEnv({})).toBeUndefined();
    expect(readTracingEnv({ OTEL_SERVICE_NAME: 'x', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toBeUndefined();
    expect(readWorkerEnv({}).tracing).toBeUndefined();
  });

  test('an endpoint turns it on: the base endpoint gets /v1/traces, protobuf and our service name by default', () => {
    expect(readTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toEqual({
      url: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      serviceName: 'kafka-flow-temporal',
    });
    expect(readTracingEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://c.example/otlp/' })?.url).toBe('https://c.example/otlp/v1/traces');
    expect(readWorkerEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }).tracing?.url).toBe('http://127.0.0.1:4318/v1/traces');
  });

  test('the traces endpoint is taken whole and wins over the base one', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://b:9999/custom' };
    expect(readTracingEnv(env)?.url).toBe('http://b:9999/custom');
  });

  test('OTEL_TRACES_EXPORTER=otlp alone: the local collector', () => {
    expect(readTracingEnv({ OTEL_TRACES_EXPORTER: 'otlp' })?.url).toBe('http://localhost:4318/v1/traces');
  });

  test('none and OTEL_SDK_DISABLED turn it off whatever else is set', () => {
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318' };
    expect(readTracingEnv({ ...on, OTEL_TRACES_EXPORTER: 'none' })).toBeUndefined();
    expect(readTracingEnv({ ...on, OTEL_SDK_DISABLED: 'TRUE' })).toBeUndefined();
    expect(readTracingEnv({ ...on, OTEL_SDK_DISABLED: 'false' })).toBeDefined();
  });

  test('protocol (the traces one wins), service name from OTEL_SERVICE_NAME or the resource attributes', () => {
    const base = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318' };
    expect(readTracingEnv({ ...base, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })?.protocol).toBe('http/json');
    expect(readTracingEnv({ ...base, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' })?.protocol).toBe('http/protobuf');
    expect(readTracingEnv({ ...base, OTEL_SERVICE_NAME: 'sales-workers' })?.serviceName).toBe('sales-workers');
    expect(readTracingEnv({ ...base, OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod,service.name=sales%20eu' })?.serviceName).toBe('sales eu');
  });

  test.each([
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url' }, /^OTEL_EXPORTER_OTLP_ENDPOINT="not a url": not a URL/],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /^OTEL_EXPORTER_OTLP_ENDPOINT="collector:4318": must be an http:\/\/ or https:\/\/ URL/],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://c:4317' }, /^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=.*must be an http/],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://u:secret@c:4318' }, /^OTEL_EXPORTER_OTLP_ENDPOINT: must not carry credentials/],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /^OTEL_EXPORTER_OTLP_PROTOCOL="grpc": must be http\/protobuf or http\/json/],
    [{ OTEL_TRACES_EXPORTER: 'jaeger' }, /^OTEL_TRACES_EXPORTER="jaeger": jaeger is not supported \(otlp or none\)/],
  ])('%j is a ConfigError naming the variable', (env, message) => {
    let err: unknown;
    try {
      readWorkerEnv(env);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(message);
    expect((err as Error).message).not.toContain('secret');
  });
});
