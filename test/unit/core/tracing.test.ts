import { errorAttributes, setTracer, spanAttributes, traced, tracingOn } from '../../../core/tracing';
import { FoldError } from '../../../flow/errors';

describe('our span attributes', () => {
  test('each field under its OpenTelemetry name; undefined, NaN and unknown fields dropped', () => {
    const fields = {
      flow: 'sales',
      topic: 'orders',
      partition: 3,
      generation: 7,
      reason: 'periodic',
      keys: 12,
      deletedKeys: undefined,
      offset: Number.NaN,
      fenced: false,
      // Not a SpanFields field: what a careless caller might pass at run time never becomes an attribute.
      key: 'berlin',
      value: '{"amount":1}',
    } as Parameters<typeof spanAttributes>[0];
    expect(spanAttributes(fields)).toEqual({
      'kafka_flow.flow': 'sales',
      'kafka_flow.topic': 'orders',
      'kafka_flow.partition': 3,
      'kafka_flow.generation': 7,
      'kafka_flow.reason': 'periodic',
      'kafka_flow.keys': 12,
      'kafka_flow.fenced': false,
    });
  });

  test('an inherited or object-valued field is not an attribute; long strings are cut', () => {
    const fields = Object.assign(Object.create({ flow: 'inherited' }), { topic: 'x'.repeat(300), outcome: { nested: true } });
    const attrs = spanAttributes(fields);
    expect(attrs).toEqual({ 'kafka_flow.topic': 'x'.repeat(256) });
  });

  test('an error is its class name and code, never its message', () => {
    const err = new FoldError('orders', 0, 'berlin', '17', new Error('cannot read amount of {"store":"berlin"}'));
    const attrs = errorAttributes(err);
    expect(attrs).toEqual({ type: 'FoldError', code: 'FOLD_FAILED' });
    expect(JSON.stringify(attrs)).not.toContain('berlin');
    expect(errorAttributes(new TypeError('x'))).toEqual({ type: 'TypeError' });
    expect(errorAttributes('a string')).toEqual({ type: 'string' });
    expect(errorAttributes(Object.assign(new Error('m'), { code: 'has spaces and "quotes"' }))).toEqual({ type: 'Error' });
  });
});

describe('traced', () => {
  afterEach(() => setTracer(undefined));

  test('off: runs the function with no span, its result and error as they are', async () => {
    expect(tracingOn()).toBe(false);
    await expect(traced('kafka-flow.persist', { flow: 'f' }, async (span) => (span === undefined ? 'no span' : 'span'))).resolves.toBe('no span');
    const boom = new Error('boom');
    await expect(
      traced('kafka-flow.persist', {}, async () => {
        throw boom;
      }),
    ).rejects.toBe(boom);
  });

  test('on: the installed tracer gets the name, the fields and the function', async () => {
    const seen: Array<{ name: string; fields: object }> = [];
    setTracer({
      span: (name, fields, fn) => {
        seen.push({ name, fields });
        return fn({ set: () => undefined, fail: () => undefined });
      },
    });
    expect(tracingOn()).toBe(true);
    await expect(traced('kafka-flow.recovery', { flow: 'f', partition: 1 }, async (span) => (span ? 'span' : 'no span'))).resolves.toBe('span');
    expect(seen).toEqual([{ name: 'kafka-flow.recovery', fields: { flow: 'f', partition: 1 } }]);
  });
});
