import { spawnSync } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import * as otel from '@opentelemetry/api';
import { InMemorySpanExporter, NodeTracerProvider, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-node';
import { silentLogger } from '../../../../core/logger';
import { traced, setTracer, tracingOn } from '../../../../core/tracing';
import { FoldError } from '../../../../flow/errors';
import { spanTracer, startTracing } from '../../../../workers/observability/tracing';

const root = path.join(__dirname, '../../../..');

describe('our spans on the OpenTelemetry SDK', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

  beforeAll(() => {
    provider.register(); // the AsyncLocalStorage context, as a worker's
    setTracer(spanTracer(provider.getTracer('test')));
  });
  afterAll(async () => {
    setTracer(undefined);
    otel.trace.disable();
    otel.context.disable();
    otel.propagation.disable();
    await provider.shutdown();
  });
  beforeEach(() => exporter.reset());

  test('a span per call, with its attributes, the nested one its child, status OK', async () => {
    await traced('kafka-flow.persist', { flow: 'sales', topic: 'orders', partition: 2, generation: 5, reason: 'periodic' }, async (span) => {
      await traced('kafka-flow.transaction', { flow: 'sales', snapshots: 3 }, async (tx) => {
        await new Promise((r) => setTimeout(r, 1));
        tx?.set({ outcome: 'committed' });
      });
      span?.set({ keys: 3, offset: '42' });
    });
    const spans = exporter.getFinishedSpans();
    expect(spans.map((s) => s.name)).toEqual(['kafka-flow.transaction', 'kafka-flow.persist']);
    const [tx, persist] = spans;
    expect(tx!.parentSpanId).toBe(persist!.spanContext().spanId);
    expect(persist!.attributes).toEqual({
      'kafka_flow.flow': 'sales',
      'kafka_flow.topic': 'orders',
      'kafka_flow.partition': 2,
      'kafka_flow.generation': 5,
      'kafka_flow.reason': 'periodic',
      'kafka_flow.keys': 3,
      'kafka_flow.offset': '42',
    });
    expect(tx!.attributes['kafka_flow.outcome']).toBe('committed');
    expect(persist!.status.code).toBe(otel.SpanStatusCode.OK);
  });

  test('a failure: error status with the class and code, no message, no exception event; rethrown as it was', async () => {
    const err = new FoldError('orders', 0, 'berlin', '17', new Error('bad value {"store":"berlin"}'));
    await expect(
      traced('kafka-flow.recovery', { flow: 'sales' }, async () => {
        throw err;
      }),
    ).rejects.toBe(err);
    const [span] = exporter.getFinishedSpans();
    expect(span!.status).toEqual({ code: otel.SpanStatusCode.ERROR, message: 'FoldError (FOLD_FAILED)' });
    expect(span!.attributes['error.type']).toBe('FoldError');
    expect(span!.events).toEqual([]);
    expect(JSON.stringify({ attributes: span!.attributes, status: span!.status })).not.toContain('berlin');
  });

  test('fail() marks a span failed without a throw (a recovery returns its failed read)', async () => {
    const returned = traced('kafka-flow.recovery', {}, async (span) => {
      span?.fail(new TypeError('x'));
      return 'returned';
    });
    await expect(returned).resolves.toBe('returned');
    expect(exporter.getFinishedSpans()[0]!.status).toEqual({ code: otel.SpanStatusCode.ERROR, message: 'TypeError' });
  });
});

describe('startTracing', () => {
  /** A local OTLP/HTTP endpoint: what each request's path and content type were. */
  async function receiver() {
    const requests: Array<{ url?: string; type?: string; bytes: number }> = [];
    const server = http.createServer((req, res) => {
      let bytes = 0;
      req.on('data', (c: Buffer) => {
        bytes += c.length;
      });
      req.on('end', () => {
        requests.push({ url: req.url, type: req.headers['content-type'], bytes });
        res.writeHead(200, { 'content-type': req.headers['content-type'] ?? 'application/json' });
        res.end(req.headers['content-type']?.includes('json') ? '{}' : '');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    return { url: `http://127.0.0.1:${port}/v1/traces`, requests, close: () => new Promise<void>((r) => server.close(() => r())) };
  }

  test.each([
    ['http/protobuf', 'application/x-protobuf'],
    ['http/json', 'application/json'],
  ] as const)('%s: our spans are exported to the URL with that encoding; shutdown exports what is buffered, then our spans are off', async (protocol, contentType) => {
    const r = await receiver();
    try {
      const tracing = startTracing({ url: r.url, protocol, serviceName: 'unit' }, { 'kafka_flow.flow': 'sales' }, silentLogger);
      expect(tracingOn()).toBe(true);
      expect(tracing.workflowInterceptorModules).toEqual([require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors')]);
      await traced('kafka-flow.persist', { flow: 'sales', partition: 0 }, async () => undefined);
      await tracing.shutdown();
      expect(tracingOn()).toBe(false);
      expect(r.requests).toEqual([{ url: '/v1/traces', type: contentType, bytes: expect.any(Number) }]);
      expect(r.requests[0]!.bytes).toBeGreaterThan(0);
    } finally {
      await r.close();
    }
  });
});

/**
 * The OpenTelemetry modules a fresh process has loaded after the worker's whole module graph as the
 * CLI loads it (the commands, the worker, both backends' factories) and `extra`, with no OTEL_*
 * variable in its environment.
 */
function otelModulesLoaded(extra = ''): { tracing: unknown; loaded: string[]; modules: number } {
  const script = `
    require('./bin/ts-loader.js');
    require('./cli.ts');
    require('./workers/worker.ts');
    require('./persistence/kafka/factory.ts');
    require('./persistence/cassandra/factory.ts');
    ${extra}
    const tracing = require('./config/env.ts').readWorkerEnv(process.env).tracing;
    const loaded = Object.keys(require.cache).filter((f) => /node_modules[\\/]@opentelemetry[\\/](sdk-|exporter-|resources|otlp-|context-async-hooks)|interceptors-opentelemetry/.test(f));
    process.stdout.write(JSON.stringify({ tracing: tracing ?? null, loaded, modules: Object.keys(require.cache).length }));
  `;
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
  const r = spawnSync(process.execPath, ['-e', script], { cwd: root, env, encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`the probe process failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}

test('with OTEL_* unset, a worker process loads no OpenTelemetry SDK, exporter or Temporal interceptor', () => {
  const off = otelModulesLoaded();
  expect(off.tracing).toBeNull();
  expect(off.loaded).toEqual([]);
  expect(off.modules).toBeGreaterThan(100); // the graph really was loaded
  // The probe sees them once the tracing module is loaded (what the worker does when OTEL_* asks).
  const on = otelModulesLoaded("require('./workers/observability/tracing.ts');");
  expect(on.loaded.some((f) => f.includes('sdk-trace-node'))).toBe(true);
  expect(on.loaded.some((f) => f.includes('interceptors-opentelemetry'))).toBe(true);
}, 120_000);
