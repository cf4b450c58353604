// Traces from a real worker process (the CLI's `worker`, real Kafka and Temporal, transactional
// Kafka persistence) to an OTLP/HTTP receiver this test runs in-process (OTEL_EXPORTER_OTLP_ENDPOINT,
// JSON encoding): spans arrive for the partition workflows (Temporal's workflow interceptors, from
// the bundle) and their activities, and ours for the recovery, the fence, a persist and its
// snapshot transaction — named by flow, topic and partition — and no record key or value appears
// anywhere in what was exported.
import http from 'node:http';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { eventually } from '../../support/eventually';
import { freshNamespace, startCli, topicWith, unique } from '../../support/servers';

const root = path.join(__dirname, '../../..');
const flowModule = path.join(root, 'test/fixtures/offset-hash-flow.ts');

interface ExportedSpan {
  name: string;
  spanId: string;
  parentSpanId?: string;
  traceId: string;
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
type KeyValue = { key: string; value: AnyValue };

const anyValue = (v: AnyValue): unknown => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue));
const attributesOf = (kvs: KeyValue[] | undefined) => Object.fromEntries((kvs ?? []).map((kv) => [kv.key, anyValue(kv.value)]));

/** An OTLP/HTTP traces receiver (JSON): every request body as it came, and the spans in them. */
async function otlpReceiver() {
  const bodies: string[] = [];
  const spans: ExportedSpan[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let raw = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') raw = gunzipSync(raw);
      const text = raw.toString('utf8');
      bodies.push(text);
      if (req.url === '/v1/traces' && String(req.headers['content-type']).startsWith('application/json')) {
        const body = JSON.parse(text) as {
          resourceSpans?: Array<{ resource?: { attributes?: KeyValue[] }; scopeSpans?: Array<{ spans?: Array<Omit<ExportedSpan, 'attributes' | 'resource'> & { attributes?: KeyValue[] }> }> }>;
        };
        for (const rs of body.resourceSpans ?? []) {
          const resource = attributesOf(rs.resource?.attributes);
          for (const ss of rs.scopeSpans ?? []) for (const s of ss.spans ?? []) spans.push({ ...s, attributes: attributesOf(s.attributes), resource });
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    bodies,
    spans,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

test('a worker with OTEL_EXPORTER_OTLP_ENDPOINT exports workflow, activity, recovery, fence, persist and transaction spans, without keys or values', async () => {
  const names = { TEST_FLOW_NAME: unique('traced'), TEST_FLOW_GROUP: unique('traced-group'), TEST_FLOW_TOPIC: unique('traced-topic') };
  const secretKeys = Array.from({ length: 4 }, (_, i) => unique(`SECRETKEY${i}`));
  const secretValue = unique('SECRETVALUE');
  await topicWith(
    names.TEST_FLOW_TOPIC,
    2,
    // Two keys on each partition, placed rather than hashed: four random keys all hash to one
    // partition one time in eight, and both partitions must write.
    secretKeys.flatMap((key, i) => [0, 1, 2].map((j) => ({ key, partition: i % 2, value: JSON.stringify({ n: i * 3 + j + 1, note: secretValue }) }))),
  );
  const receiver = await otlpReceiver();
  // A namespace of its own: in the shared one, another file's (untraced) worker may run this flow's
  // workflow tasks, and the workflow's spans would not be exported.
  const namespace = await freshNamespace('kft-traced');
  const worker = startCli(['worker', flowModule], {
    TEMPORAL_NAMESPACE: namespace,
    ...names,
    TEST_FLOW_BACKEND: 'kafka',
    KFT_EXIT_WITH_PARENT: '0',
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: names.TEST_FLOW_NAME,
    OTEL_BSP_SCHEDULE_DELAY: '200', // export every 200 ms (5 s by default)
  });
  try {
    const named = (name: string) => receiver.spans.filter((s) => s.name === name);
    // Both partitions recovered and folded; a persist wrote their keys in a transaction.
    await eventually(
      'the recovery, fence, persist and transaction spans of both partitions, and the workflows\' and activities\' spans',
      () => {
        if (worker.child.exitCode !== null) throw new Error(`the worker exited ${worker.child.exitCode}: ${worker.output()}`);
        const partitionsOf = (name: string) => new Set(named(name).map((s) => s.attributes['kafka_flow.partition']));
        const written = named('kafka-flow.transaction').filter((s) => Number(s.attributes['kafka_flow.snapshots']) > 0);
        return ['kafka-flow.recovery', 'kafka-flow.fence'].every((n) => partitionsOf(n).size === 2) &&
          new Set(written.map((s) => s.attributes['kafka_flow.partition'])).size === 2 &&
          named('kafka-flow.persist').length > 0 &&
          named('RunActivity:recover').length >= 2 &&
          ['StartActivity:recover', 'HandleSignal:assigned'].every((n) => named(n).length >= 1)
          ? true
          : undefined;
      },
      60_000,
      () => `spans so far: ${[...new Set(receiver.spans.map((s) => s.name))].join(', ')}\nthe worker's last lines:\n${worker.output().split('\n').slice(-15).join('\n')}`,
    );
    // A graceful stop exports what is still buffered (the revoke's persists, the fold loops' activity spans).
    expect(await worker.stop()).toBe(0);
    expect(named('RunActivity:foldLoop').length).toBeGreaterThanOrEqual(2);

    const scoped = (s: ExportedSpan) => ({ flow: s.attributes['kafka_flow.flow'], topic: s.attributes['kafka_flow.topic'], partition: s.attributes['kafka_flow.partition'] });
    for (const name of ['kafka-flow.recovery', 'kafka-flow.fence', 'kafka-flow.persist', 'kafka-flow.transaction']) {
      for (const s of named(name)) {
        expect({ name, ...scoped(s) }).toEqual({ name, flow: names.TEST_FLOW_NAME, topic: names.TEST_FLOW_TOPIC, partition: expect.any(Number) });
      }
    }
    for (const s of named('kafka-flow.recovery')) expect(s.attributes['kafka_flow.generation']).toEqual(expect.any(Number));
    const tx = named('kafka-flow.transaction').find((s) => Number(s.attributes['kafka_flow.snapshots']) > 0)!;
    expect(tx.attributes).toMatchObject({ 'kafka_flow.outcome': 'committed', 'kafka_flow.generation': expect.any(Number), 'kafka_flow.offset': expect.any(Number) });
    // 12 records over 4 keys: every key written by some persist.
    const keysWritten = named('kafka-flow.persist').reduce((n, s) => n + Number(s.attributes['kafka_flow.keys'] ?? 0), 0);
    expect(keysWritten).toBeGreaterThanOrEqual(secretKeys.length);

    // Every span of the process carries the service and the flow on its resource.
    for (const s of receiver.spans) expect(s.resource).toMatchObject({ 'service.name': names.TEST_FLOW_NAME, 'kafka_flow.flow': names.TEST_FLOW_NAME });
    // The workflow's span of an activity is the parent of the activity's own run (the context crossed
    // from the workflow sandbox through Temporal to the activity worker).
    const linked = named('RunActivity:recover').flatMap((run) => {
      const start = receiver.spans.find((s) => s.spanId === run.parentSpanId);
      return start ? [{ parent: start.name, sameTrace: start.traceId === run.traceId }] : [];
    });
    expect(linked[0]).toEqual({ parent: 'StartActivity:recover', sameTrace: true });
    // The recovery (ours) inside the recover activity: a child of the activity's span, when the
    // activity ran it (one started at the join runs before any activity: a root of its own).
    const recoveryParents = named('kafka-flow.recovery').map((s) => receiver.spans.find((p) => p.spanId === s.parentSpanId)?.name ?? 'root');
    for (const p of recoveryParents) expect(['RunActivity:recover', 'root']).toContain(p);

    // Nothing of a record's key or value anywhere in what was exported.
    const exported = receiver.bodies.join('\n');
    expect(exported.length).toBeGreaterThan(0);
    const leaked = [...secretKeys, secretValue].filter((secret) => exported.includes(secret));
    expect(leaked).toEqual([]);
  } finally {
    await worker.stop();
    await receiver.close();
  }
}, 90_000);
