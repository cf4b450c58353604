// Transaction version 2 (KIP-890 part 2) on the wire: ApiVersions v3 (the finalized features that
// say whether the cluster speaks it), Produce v12, TxnOffsetCommit v5 and EndTxn v5, against the spec
// (apache/kafka clients/src/main/resources/common/message/{ApiVersions,Produce,TxnOffsetCommit,EndTxn}
// {Request,Response}.json of Kafka 4.3.1: flexible from ApiVersions v3, Produce v9, TxnOffsetCommit
// v3, EndTxn v3). The v2-only versions are sent only when asked for: the version lookup never picks them.
import { apiVersionsV3, apiVersionsV3Request, decodeApiVersionsV3Response } from '../../../../kafka/protocol/api-versions-v3';
import { decodeEndTxnV5Response, endTxnV5, endTxnV5Request } from '../../../../kafka/protocol/end-txn-v5';
import { decodeProduceV12Response, produceV12Request } from '../../../../kafka/protocol/produce-v12';
import { writeProduceBody } from '../../../../kafka/protocol/produce-writer';
import { txnOffsetCommitV3Request, txnOffsetCommitV5 } from '../../../../kafka/protocol/txn-offset-commit-v3';
import { type BrokerVersions, hex, kafkajsModule, negotiatedVersion, type ProtocolError } from '../../patches/kafkajs/wire';
import { fixtureRequests, NOW, type ProduceArgs, REVERSE_CODEC_TYPE, request, reverseCodec, variedMessages } from './produce-cases';

type Definition = { versions: string[]; explicitVersions?: string[]; protocol: (args: { version: number }) => unknown };
const definition = (name: string) => kafkajsModule<Definition>(`protocol/requests/${name}`);
const { Codecs } = kafkajsModule<{ Codecs: Record<number, unknown> }>('protocol/message/compression');

beforeEach(() => {
  jest.spyOn(Date, 'now').mockReturnValue(NOW);
});
afterEach(() => {
  jest.restoreAllMocks();
});

describe('ApiVersions v3', () => {
  it('encodes the client software name and version after the request header v2 tag buffer', async () => {
    const req = apiVersionsV3Request();
    expect(req).toMatchObject({ apiKey: 18, apiVersion: 3, apiName: 'ApiVersions' });
    const golden = hex(`
      00                                              # request header v2 tag buffer
      14 6b61666b612d666c6f772d74656d706f72616c        # client_software_name    COMPACT_STRING "kafka-flow-temporal" (19 + 1)
      06 302e312e30                                    # client_software_version COMPACT_STRING "0.1.0"
      00                                              # TAG_BUFFER
    `);
    expect((await req.encode()).buffer.toString('hex')).toBe(golden.toString('hex'));
  });

  it('reads the API versions and the finalized features (tag 2), skipping the supported features (tag 0)', async () => {
    const body = Buffer.concat([
      hex(`
        00 00                   # error_code INT16 0 (response header v0: nothing before it)
        03                      # api_keys COMPACT_ARRAY, 2 elements
          00 00 00 03 00 0d 00  #   Produce 3-13, TAG_BUFFER
          00 1a 00 00 00 05 00  #   EndTxn 0-5, TAG_BUFFER
        00 00 00 07             # throttle_time_ms INT32 7
        02                      # TAG_BUFFER: 2 tagged fields
          00 0b                 #   tag 0 supported_features, 11 bytes:
            02                  #     COMPACT_ARRAY, 1 element
            05 61 62 63 64      #     name "abcd"
            00 00 00 02 00      #     min 0, max 2, TAG_BUFFER
          02 1a                 #   tag 2 finalized_features, 26 bytes:
            02                  #     COMPACT_ARRAY, 1 element
            14 7472616e73616374696f6e2e76657273696f6e  # name "transaction.version" (19 + 1)
            00 02 00 02 00      #     max_version_level 2, min_version_level 2, TAG_BUFFER
      `),
    ]);
    const decoded = await decodeApiVersionsV3Response(body);
    expect(decoded).toEqual({
      errorCode: 0,
      apiVersions: [
        { apiKey: 0, minVersion: 3, maxVersion: 13 },
        { apiKey: 26, minVersion: 0, maxVersion: 5 },
      ],
      throttleTime: 0,
      clientSideThrottleTime: 7,
      finalizedFeatures: { 'transaction.version': 2 },
    });
  });

  it('without tagged fields: no finalized features', async () => {
    const decoded = await decodeApiVersionsV3Response(hex('00 00  01  00 00 00 00'));
    expect(decoded.finalizedFeatures).toEqual({});
    expect(decoded.apiVersions).toEqual([]);
  });

  it("a broker without v3 answers a v0 body with UNSUPPORTED_VERSION: kafkajs's error, on which it tries v2", async () => {
    const v0Body = hex('00 23  00 00 00 01  00 12 00 00 00 02'); // error 35, api_keys INT32 array [ApiVersions 0-2]
    await expect(decodeApiVersionsV3Response(v0Body)).rejects.toMatchObject({ type: 'UNSUPPORTED_VERSION' });
  });

  it('is the version kafkajs asks a broker for first', () => {
    const apiVersions = definition('apiVersions');
    expect(apiVersions.versions.map(Number)).toContain(3);
    const v3 = (apiVersions.protocol({ version: 3 }) as () => { request: { apiVersion: number } })();
    expect(v3.request.apiVersion).toBe(3);
    expect(apiVersionsV3().request.apiVersion).toBe(3);
  });
});

describe('EndTxn v5', () => {
  it('encodes the transactional id, producer id and epoch and the result', async () => {
    const req = endTxnV5Request({ transactionalId: 'tx', producerId: 1234, producerEpoch: 3, transactionResult: true });
    expect(req).toMatchObject({ apiKey: 26, apiVersion: 5, apiName: 'EndTxn' });
    const golden = hex(`
      00                        # request header v2 tag buffer
      03 74 78                  # transactional_id COMPACT_STRING "tx"
      00 00 00 00 00 00 04 d2   # producer_id      INT64 1234
      00 03                     # producer_epoch   INT16 3
      01                        # committed        BOOLEAN true
      00                        # TAG_BUFFER
    `);
    expect((await req.encode()).buffer.toString('hex')).toBe(golden.toString('hex'));
    const abort = await endTxnV5Request({ transactionalId: 'tx', producerId: 1234, producerEpoch: 3, transactionResult: false }).encode();
    expect(abort.buffer[abort.buffer.length - 2]).toBe(0);
  });

  it('reads the producer id and the bumped epoch of the next transaction', async () => {
    const raw = hex(`
      00                        # response header v1 tag buffer
      00 00 00 00               # throttle_time_ms INT32 0
      00 00                     # error_code       INT16 0
      00 00 00 00 00 00 04 d2   # producer_id      INT64 1234
      00 04                     # producer_epoch   INT16 4
      00                        # TAG_BUFFER
    `);
    expect(await decodeEndTxnV5Response(raw)).toEqual({ throttleTime: 0, clientSideThrottleTime: 0, errorCode: 0, producerId: '1234', producerEpoch: 4 });
  });

  it('raises PRODUCER_FENCED as kafkajs does (not retriable)', async () => {
    const { response } = endTxnV5({ transactionalId: 'tx', producerId: 1, producerEpoch: 0, transactionResult: true });
    const decoded = await response.decode(hex('00  00 00 00 00  00 5a  ff ff ff ff ff ff ff ff  ff ff  00'));
    const error = await response.parse(decoded).catch((e: ProtocolError) => e);
    expect(error).toMatchObject({ type: 'PRODUCER_FENCED', retriable: false });
  });
});

describe('TxnOffsetCommit v5', () => {
  it("has v3's bytes under version 5", async () => {
    const args = { transactionalId: 'tx', groupId: 'g', producerId: 1, producerEpoch: 2, generationId: 3, memberId: 'm', topics: [{ topic: 't', partitions: [{ partition: 0, offset: '9' }] }] };
    const v5 = txnOffsetCommitV5(args).request;
    expect(v5.apiVersion).toBe(5);
    expect((await v5.encode()).buffer.toString('hex')).toBe((await txnOffsetCommitV3Request(args).encode()).buffer.toString('hex'));
  });
});

describe('Produce v12', () => {
  it('writes the flexible framing around the same record batch', async () => {
    const args = request([{ partition: 2, firstSequence: 5, messages: [{ key: 'k', value: 'v' }] }], { compression: 0 });
    const classic = (await writeProduceBody(args as never))!;
    const flexible = (await (await produceV12Request(args as never).encode()).buffer) as Buffer;
    // classic: STRING "kft-snapshot-3" (2 + 14), acks, timeout, [1 topic] STRING "outputs", [1 partition], INT32 size, batch
    const batch = classic.subarray(2 + 14 + 2 + 4 + 4 + 2 + 7 + 4 + 4 + 4);
    const golden = Buffer.concat([
      hex(`
        00                                # request header v2 tag buffer
        0f 6b66742d736e617073686f742d33   # transactional_id COMPACT_NULLABLE_STRING "kft-snapshot-3" (14 + 1)
        ff ff                             # acks             INT16 -1
        00 00 75 30                       # timeout_ms       INT32 30000
        02                                # topic_data       COMPACT_ARRAY, 1 element
          08 6f757470757473               #   name           COMPACT_STRING "outputs"
          02                              #   partition_data COMPACT_ARRAY, 1 element
            00 00 00 02                   #     index        INT32 2
      `),
      Buffer.from([batch.length + 1]), //      records        COMPACT_RECORDS: length + 1 (one byte here), then the batch
      batch,
      hex(`
            00                            #     partition TAG_BUFFER
          00                              #   topic TAG_BUFFER
        00                                # TAG_BUFFER
      `),
    ]);
    expect(flexible.toString('hex')).toBe(golden.toString('hex'));
  });

  /** The classic body re-framed as v12 by hand: a second, independent reading of the framing. */
  function reframe(classic: Buffer): Buffer {
    const out: number[] = [0];
    const uvarint = (n: number) => {
      while (n >= 0x80) {
        out.push((n & 0x7f) | 0x80);
        n = Math.floor(n / 128);
      }
      out.push(n);
    };
    const push = (b: Buffer) => out.push(...b);
    let at = 0;
    const str = () => {
      const len = classic.readInt16BE(at);
      at += 2;
      if (len < 0) return uvarint(0);
      uvarint(len + 1);
      push(classic.subarray(at, at + len));
      at += len;
    };
    str();
    push(classic.subarray(at, at + 6));
    at += 6;
    const topics = classic.readInt32BE(at);
    at += 4;
    uvarint(topics + 1);
    for (let t = 0; t < topics; t++) {
      str();
      const partitions = classic.readInt32BE(at);
      at += 4;
      uvarint(partitions + 1);
      for (let p = 0; p < partitions; p++) {
        push(classic.subarray(at, at + 4));
        const size = classic.readInt32BE(at + 4);
        at += 8;
        uvarint(size + 1);
        push(classic.subarray(at, at + size));
        at += size;
        out.push(0);
      }
      out.push(0);
    }
    out.push(0);
    expect(at).toBe(classic.length);
    return Buffer.from(out);
  }

  it('frames every fixture request and large varied ones (record sets past one-byte lengths, compressed, several topics) as the classic body re-framed', async () => {
    const saved = Codecs[REVERSE_CODEC_TYPE];
    Codecs[REVERSE_CODEC_TYPE] = () => reverseCodec;
    try {
      const cases: ProduceArgs[] = [
        ...Object.values(fixtureRequests()),
        request([{ partition: 0, messages: variedMessages(300, 1) }]),
        request([{ partition: 1, messages: variedMessages(50, 2) }], { compression: REVERSE_CODEC_TYPE }),
        request([], { transactionalId: null, topicData: [{ topic: 'a', partitions: [{ partition: 0, messages: variedMessages(3, 3) }] }, { topic: 'bé', partitions: [{ partition: 4, messages: variedMessages(2, 4) }, { partition: 5, messages: variedMessages(200, 5) }] }] }),
      ];
      for (const c of cases) {
        const args = { compression: 0, ...c }; // kafkajs's producer defaults it
        const classic = await writeProduceBody(args as never);
        expect(classic).toBeDefined();
        if (!classic) continue;
        const flexible = (await produceV12Request(args as never).encode()).buffer as Buffer;
        expect(flexible.toString('hex')).toBe(reframe(classic).toString('hex'));
      }
    } finally {
      Codecs[REVERSE_CODEC_TYPE] = saved;
    }
  });

  it('refuses a message shape only kafkajs\'s v3-v7 encoders take, with a named error', async () => {
    const args = request([{ partition: 0, messages: [{ key: 'k', value: 42 }] }], { compression: 0 });
    await expect(produceV12Request(args as never).encode()).rejects.toMatchObject({ name: 'ProduceV12MessageShapeError' });
  });

  it("reads the answer into kafkajs's shape, skipping record errors, the error message and the tagged leader hints", async () => {
    const raw = hex(`
      00                          # response header v1 tag buffer
      02                          # responses COMPACT_ARRAY, 1 element
        02 74                     #   name COMPACT_STRING "t"
        02                        #   partition_responses COMPACT_ARRAY, 1 element
          00 00 00 01             #     index INT32 1
          00 00                   #     error_code INT16 0
          00 00 00 00 00 00 00 2a #     base_offset INT64 42
          ff ff ff ff ff ff ff ff #     log_append_time_ms INT64 -1
          00 00 00 00 00 00 00 00 #     log_start_offset INT64 0
          02                      #     record_errors COMPACT_ARRAY, 1 element
            00 00 00 00 02 78 00  #       batch_index 0, message "x", TAG_BUFFER
          00                      #     error_message COMPACT_NULLABLE_STRING null
          01 00 08 00000003 00000009  # TAG_BUFFER: tag 0 current_leader (8 bytes: leader 3, epoch 9)
        00                        #   topic TAG_BUFFER
      00 00 00 05                 # throttle_time_ms INT32 5
      00                          # TAG_BUFFER
    `);
    expect(await decodeProduceV12Response(raw)).toEqual({
      topics: [{ topicName: 't', partitions: [{ partition: 1, errorCode: 0, baseOffset: '42', logAppendTime: '-1', logStartOffset: '0' }] }],
      throttleTime: 0,
      clientSideThrottleTime: 5,
    });
  });
});

describe('the version-2-only versions are sent only when asked for', () => {
  const broker: BrokerVersions = { 0: { minVersion: 3, maxVersion: 13 }, 26: { minVersion: 0, maxVersion: 5 }, 28: { minVersion: 0, maxVersion: 5 } };

  it('the lookup keeps picking Produce v7, EndTxn v1 and TxnOffsetCommit v3 from a broker that has v12 / v5 / v5', () => {
    expect(negotiatedVersion(broker, 0, 'Produce')).toBe(7);
    expect(negotiatedVersion(broker, 26, 'EndTxn')).toBe(1);
    expect(negotiatedVersion(broker, 28, 'TxnOffsetCommit')).toBe(3);
    expect(definition('produce').explicitVersions).toEqual(['12']);
    expect(definition('endTxn').explicitVersions).toEqual(['5']);
    expect(definition('txnOffsetCommit').explicitVersions).toEqual(['5']);
  });

  it('an exact version the broker lacks is refused by name', () => {
    const { lookupExact, requests } = kafkajsModule<{
      lookupExact: (v: BrokerVersions) => (apiKey: number, d: Definition, version: number) => unknown;
      requests: Record<string, Definition>;
    }>('protocol/requests');
    expect(() => lookupExact({ 26: { minVersion: 0, maxVersion: 4 } })(26, requests.EndTxn!, 5)).toThrow(/does not support version 5/);
    expect(typeof lookupExact(broker)(26, requests.EndTxn!, 5)).toBe('function');
  });
});
