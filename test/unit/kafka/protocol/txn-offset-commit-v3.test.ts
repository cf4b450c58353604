// TxnOffsetCommit v3 (KIP-447, kafka/protocol/txn-offset-commit-v3.ts) against the spec:
// apache/kafka clients/src/main/resources/common/message/TxnOffsetCommit{Request,Response}.json
// ("validVersions": "0-3" there, "flexibleVersions": "3+").
import { decodeTxnOffsetCommitV3Response, txnOffsetCommitV3, txnOffsetCommitV3Request } from '../../../../kafka/protocol/txn-offset-commit-v3';
import { type EncodedRequest, hex, kafkajsModule, type ProtocolError } from '../../patches/kafkajs/wire';

const request = txnOffsetCommitV3Request;
const response = txnOffsetCommitV3({ transactionalId: 'tx', groupId: 'g', producerId: 1, producerEpoch: 0, topics: [] }).response;
const frame = kafkajsModule<
  (args: { correlationId: number; clientId: string; request: EncodedRequest }) => Promise<{ buffer: Buffer }>
>('protocol/request');
const { versions, protocol } = kafkajsModule<{
  versions: string[];
  protocol: (args: { version: number }) => (args: Record<string, unknown>) => { request: EncodedRequest; response: unknown };
}>('protocol/requests/txnOffsetCommit');

const commit = {
  transactionalId: 'tx',
  groupId: 'g',
  producerId: 1234,
  producerEpoch: 3,
  generationId: 7,
  memberId: 'm-1',
  topics: [{ topic: 't', partitions: [{ partition: 2, offset: '100' }] }],
};

const goldenBody = hex(`
  00                          # request header v2 tag buffer (kafkajs writes header v1 itself)
  03 74 78                    # transactional_id  COMPACT_STRING "tx" (length + 1 = 3)
  02 67                       # group_id          COMPACT_STRING "g"
  00 00 00 00 00 00 04 d2     # producer_id       INT64 1234
  00 03                       # producer_epoch    INT16 3
  00 00 00 07                 # generation_id     INT32 7
  04 6d 2d 31                 # member_id         COMPACT_STRING "m-1"
  00                          # group_instance_id COMPACT_NULLABLE_STRING null
  02                          # topics            COMPACT_ARRAY, 1 element
    02 74                     #   name            COMPACT_STRING "t"
    02                        #   partitions      COMPACT_ARRAY, 1 element
      00 00 00 02             #     partition_index        INT32 2
      00 00 00 00 00 00 00 64 #     committed_offset       INT64 100
      ff ff ff ff             #     committed_leader_epoch INT32 -1 (v2+, default)
      00                      #     committed_metadata     COMPACT_NULLABLE_STRING null
      00                      #     partition TAG_BUFFER
    00                        #   topic TAG_BUFFER
  00                          # TAG_BUFFER
`);

describe('TxnOffsetCommit v3 request', () => {
  it('encodes the KIP-447 group metadata and flexible fields byte for byte', async () => {
    const req = request(commit);
    expect(req).toMatchObject({ apiKey: 28, apiVersion: 3, apiName: 'TxnOffsetCommit' });
    expect((await req.encode()).buffer.toString('hex')).toBe(goldenBody.toString('hex'));
  });

  it('frames as request header v2: header v1 fields then the tag buffer', async () => {
    const framed = await frame({ correlationId: 1, clientId: 'c', request: request(commit) });
    const golden = Buffer.concat([
      hex(`
        00 00 00 3c   # message size INT32 = 11 header bytes + 49 body bytes
        00 1c         # request_api_key INT16 28 (TxnOffsetCommit)
        00 03         # request_api_version INT16 3
        00 00 00 01   # correlation_id INT32 1
        00 01 63      # client_id NULLABLE_STRING "c" (INT16 length: not compact, even in v2)
      `),
      goldenBody,
    ]);
    expect(framed.buffer.toString('hex')).toBe(golden.toString('hex'));
  });

  it('defaults to generation -1, empty member and a metadata string when given', async () => {
    const req = request({
      transactionalId: 'tx',
      groupId: 'g',
      producerId: '9007199254740993', // > 2^53: INT64 from a string, not a float
      producerEpoch: 0,
      groupInstanceId: 'i',
      topics: [{ topic: 't', partitions: [{ partition: 0, offset: '0', metadata: 'ab' }] }],
    });
    const golden = hex(`
      00
      03 74 78
      02 67
      00 20 00 00 00 00 00 01     # producer_id 2^53 + 1
      00 00
      ff ff ff ff                 # generation_id -1: no generation check
      01                          # member_id "" (length + 1 = 1)
      02 69                       # group_instance_id "i"
      02 02 74 02
        00 00 00 00
        00 00 00 00 00 00 00 00
        ff ff ff ff
        03 61 62                  # committed_metadata "ab"
        00
      00
      00
    `);
    expect((await req.encode()).buffer.toString('hex')).toBe(golden.toString('hex'));
  });

  it('is registered (the kafkajs patch\'s hook), so the broker-negotiated version picks it', async () => {
    expect(versions).toEqual(['0', '1', '3']);
    const { request: req, response: codec } = protocol({ version: 3 })(commit);
    expect(req.apiVersion).toBe(3);
    expect((await req.encode()).buffer.toString('hex')).toBe(goldenBody.toString('hex'));
    expect(codec).toEqual({ decode: decodeTxnOffsetCommitV3Response, parse: response.parse });
  });
});

describe('TxnOffsetCommit v3 response', () => {
  it('skips the response header tag buffer and decodes per-partition errors', async () => {
    const raw = hex(`
      00                 # response header v1 tag buffer
      00 00 00 0a        # throttle_time_ms INT32 10
      02                 # topics COMPACT_ARRAY, 1 element
        02 74            #   name "t"
        03               #   partitions COMPACT_ARRAY, 2 elements
          00 00 00 02 00 16 00   # partition 2, error_code 22 ILLEGAL_GENERATION, TAG_BUFFER
          00 00 00 05 00 00 00   # partition 5, error_code 0, TAG_BUFFER
        00               #   topic TAG_BUFFER
      00                 # TAG_BUFFER
    `);
    const decoded = await response.decode(raw);
    expect(decoded).toEqual({
      throttleTime: 0,
      clientSideThrottleTime: 10,
      topics: [
        {
          topic: 't',
          partitions: [
            { partition: 2, errorCode: 22 },
            { partition: 5, errorCode: 0 },
          ],
        },
      ],
    });
    await expect(response.parse(decoded)).rejects.toMatchObject({
      type: 'ILLEGAL_GENERATION',
      code: 22,
      retriable: false,
    } satisfies Partial<ProtocolError>);
  });

  it('skips non-empty tagged fields by their plain byte size', async () => {
    const raw = hex(`
      01 05 02 aa bb     # header tag buffer: 1 field, tag 5, size 2, 2 bytes
      00 00 00 00
      02 02 74 02
        00 00 00 00 00 19      # partition 0, error_code 25 UNKNOWN_MEMBER_ID
        01 00 03 01 02 03      # 1 tagged field: tag 0, size 3, 3 bytes
        00
      00
    `);
    const decoded = await response.decode(raw);
    expect(decoded.topics).toEqual([{ topic: 't', partitions: [{ partition: 0, errorCode: 25 }] }]);
    await expect(response.parse(decoded)).rejects.toMatchObject({ type: 'UNKNOWN_MEMBER_ID', code: 25 });
  });

  it('parses an all-success response', async () => {
    const raw = hex('00 00000000 02 0274 02 00000001 0000 00 00 00');
    const decoded = await response.decode(raw);
    await expect(response.parse(decoded)).resolves.toBe(decoded);
  });
});
