// OffsetFetch v7 (require_stable, KIP-447, kafka/protocol/offset-fetch-v7.ts) against the spec:
// apache/kafka clients/src/main/resources/common/message/OffsetFetch{Request,Response}.json
// (flexible from v6; v7 adds RequireStable; GroupId/Topics are v0-7 fields).
import { decodeOffsetFetchV7Response, offsetFetchV7, offsetFetchV7Request } from '../../../../kafka/protocol/offset-fetch-v7';
import { type EncodedRequest, hex, kafkajsModule, type ProtocolError } from '../../patches/kafkajs/wire';

const request = offsetFetchV7Request;
const response = offsetFetchV7({ groupId: 'g' }).response;
const { versions, protocol } = kafkajsModule<{
  versions: string[];
  protocol: (args: { version: number }) => (args: Record<string, unknown>) => { request: EncodedRequest; response: unknown };
}>('protocol/requests/offsetFetch');

describe('OffsetFetch v7 request', () => {
  it('encodes topics, partition indexes and require_stable byte for byte', async () => {
    const req = request({
      groupId: 'g',
      topics: [{ topic: 't', partitions: [{ partition: 0 }, { partition: 3 }] }],
      requireStable: true,
    });
    expect(req).toMatchObject({ apiKey: 9, apiVersion: 7, apiName: 'OffsetFetch' });
    const golden = hex(`
      00                # request header v2 tag buffer
      02 67             # group_id COMPACT_STRING "g"
      02                # topics COMPACT_NULLABLE_ARRAY, 1 element
        02 74           #   name COMPACT_STRING "t"
        03              #   partition_indexes COMPACT_ARRAY of INT32, 2 elements
          00 00 00 00   #     0
          00 00 00 03   #     3
        00              #   topic TAG_BUFFER
      01                # require_stable BOOLEAN true
      00                # TAG_BUFFER
    `);
    expect((await req.encode()).buffer.toString('hex')).toBe(golden.toString('hex'));
  });

  it('encodes an empty topic list as null (all topics) and require_stable false by default', async () => {
    const golden = hex(`
      00 02 67
      00                # topics: null
      00                # require_stable false
      00
    `);
    expect((await request({ groupId: 'g', topics: [] }).encode()).buffer.toString('hex')).toBe(golden.toString('hex'));
    expect((await request({ groupId: 'g', topics: null }).encode()).buffer.toString('hex')).toBe(
      golden.toString('hex'),
    );
  });

  it('is registered next to kafkajs v1-v4 (the kafkajs patch\'s hook)', async () => {
    expect(versions).toEqual(['1', '2', '3', '4', '7']);
    const { request: req, response: codec } = protocol({ version: 7 })({ groupId: 'g', topics: [], requireStable: true });
    expect(req).toMatchObject({ apiKey: 9, apiVersion: 7, apiName: 'OffsetFetch' });
    expect((await req.encode()).buffer.toString('hex')).toBe(hex('00 02 67 00 01 00').toString('hex'));
    expect(codec).toEqual({ decode: decodeOffsetFetchV7Response, parse: response.parse });
  });
});

describe('OffsetFetch v7 response', () => {
  const raw = hex(`
    00                          # response header v1 tag buffer
    00 00 00 00                 # throttle_time_ms 0
    02                          # topics COMPACT_ARRAY, 1 element
      02 74                     #   name "t"
      03                        #   partitions COMPACT_ARRAY, 2 elements
        00 00 00 00             #     partition_index 0
        00 00 00 00 00 00 00 2a #     committed_offset 42
        00 00 00 05             #     committed_leader_epoch 5
        01                      #     metadata COMPACT_NULLABLE_STRING ""
        00 00                   #     error_code 0
        00                      #     TAG_BUFFER
        00 00 00 03             #     partition_index 3
        ff ff ff ff ff ff ff ff #     committed_offset -1
        ff ff ff ff             #     committed_leader_epoch -1
        00                      #     metadata null
        00 58                   #     error_code 88 UNSTABLE_OFFSET_COMMIT
        00                      #     TAG_BUFFER
      00                        #   topic TAG_BUFFER
    00 00                       # error_code 0
    00                          # TAG_BUFFER
  `);

  it('decodes to the v1-v4 shape plus the leader epoch', async () => {
    expect(await response.decode(raw)).toEqual({
      throttleTime: 0,
      clientSideThrottleTime: 0,
      errorCode: 0,
      responses: [
        {
          topic: 't',
          partitions: [
            { partition: 0, offset: '42', leaderEpoch: 5, metadata: '', errorCode: 0 },
            { partition: 3, offset: '-1', leaderEpoch: -1, metadata: null, errorCode: 88 },
          ],
        },
      ],
    });
  });

  it('raises UNSTABLE_OFFSET_COMMIT as a retriable error', async () => {
    await expect(response.parse(await response.decode(raw))).rejects.toMatchObject({
      type: 'UNSTABLE_OFFSET_COMMIT',
      code: 88,
      retriable: true,
    } satisfies Partial<ProtocolError>);
  });

  it('raises a top-level error code', async () => {
    const decoded = await response.decode(hex('00 00000000 01 0010 00')); // empty topics, error 16
    expect(decoded.errorCode).toBe(16);
    await expect(response.parse(decoded)).rejects.toMatchObject({ type: 'NOT_COORDINATOR_FOR_GROUP', code: 16 });
  });
});
