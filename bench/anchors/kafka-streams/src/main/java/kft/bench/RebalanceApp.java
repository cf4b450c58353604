package kft.bench;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.RecordMetadata;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * bench:rebalance's Kafka Streams side: the offset-hash topology of test/fixtures/offset-hash-flow.ts
 * (per key a count and a running hash over the folded offsets) in a changelogged store,
 * exactly-once v2, commit interval 1 s, session timeout 6 s, heartbeat 1 s — Kafka Streams'
 * own (cooperative) rebalancing on the classic group protocol. acceptable.recovery.lag is set
 * to its maximum so a joining instance takes its active tasks at once and restores them (as ours
 * recovers from snapshots), instead of warming up replicas for a probing rebalance 10 min later.
 *
 * The fold probe, as bench/flows/offset-hash-probe.ts: for the first record of a partition after
 * 10 ms without a line, "<epoch ms> <partition> <offset>" is appended to the fold log (unbuffered,
 * so a kill -9 loses nothing written). Prints "STATE <new state> <epoch ms>" on each state change.
 *
 * An optional sixth argument sets num.standby.replicas (default 0, Kafka Streams' default, as
 * bench:rebalance runs it); bench:failover runs two instances with 1.
 *
 * Usage: java -cp kafka-streams-anchor.jar kft.bench.RebalanceApp <bootstrap> <application.id> <input topic> <state dir> <fold log> [standby replicas]
 */
public final class RebalanceApp {

  /** A key's count, running hash and last offset: 20 bytes. */
  record Hash(long count, int hash, long last) {}

  static final Serde<Hash> HASH = new FixedSerde<>(20, (b, h) -> b.putLong(h.count()).putInt(h.hash()).putLong(h.last()), b -> new Hash(b.getLong(), b.getInt(), b.getLong()));


  static final class Probe {
    private final FileOutputStream out;
    private final long[] notedAt = new long[4096];

    Probe(String file) throws IOException {
      out = new FileOutputStream(file, true);
    }

    synchronized void note(int partition, long offset) {
      long now = System.currentTimeMillis();
      if (partition < 0 || partition >= notedAt.length || now - notedAt[partition] < 10) return;
      notedAt[partition] = now;
      try {
        out.write((now + " " + partition + " " + offset + "\n").getBytes(StandardCharsets.US_ASCII));
      } catch (IOException e) {
        throw new IllegalStateException("fold log", e);
      }
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 5) {
      System.err.println("usage: RebalanceApp <bootstrap> <application.id> <input topic> <state dir> <fold log> [standby replicas]");
      System.exit(2);
    }
    String bootstrap = args[0];
    String applicationId = args[1];
    String topic = args[2];
    String stateDir = args[3];
    Probe probe = new Probe(args[4]);
    int standbys = args.length > 5 ? Integer.parseInt(args[5]) : 0;

    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 1000);
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    props.put(StreamsConfig.ACCEPTABLE_RECOVERY_LAG_CONFIG, Long.MAX_VALUE);
    props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, standbys);
    props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
    props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);

    StreamsBuilder builder = new StreamsBuilder();
    builder
        .stream(topic, Consumed.with(Serdes.String(), Serdes.ByteArray()))
        .processValues(() -> new FixedKeyProcessor<String, byte[], Long>() {
          private FixedKeyProcessorContext<String, Long> context;

          @Override
          public void init(FixedKeyProcessorContext<String, Long> context) {
            this.context = context;
          }

          @Override
          public void process(FixedKeyRecord<String, byte[]> record) {
            RecordMetadata meta = context.recordMetadata().orElseThrow();
            probe.note(meta.partition(), meta.offset());
            context.forward(record.withValue(meta.offset()));
          }
        })
        .groupByKey(Grouped.with(Serdes.String(), Serdes.Long()))
        .aggregate(
            () -> new Hash(0, 17, -1),
            (key, offset, h) -> new Hash(h.count() + 1, h.hash() * 31 + (int) (long) offset, offset),
            Materialized.<String, Hash, KeyValueStore<Bytes, byte[]>>as("offsethash")
                .withKeySerde(Serdes.String())
                .withValueSerde(HASH));

    KafkaStreams streams = new KafkaStreams(builder.build(), props);
    CountDownLatch stopped = new CountDownLatch(1);
    streams.setStateListener((newState, oldState) -> {
      System.out.println("STATE " + newState + " " + System.currentTimeMillis());
      System.out.flush();
      if (newState == KafkaStreams.State.NOT_RUNNING || newState == KafkaStreams.State.ERROR) stopped.countDown();
    });
    streams.setUncaughtExceptionHandler(e -> {
      System.err.println("FATAL " + e);
      return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    // SIGTERM: leave the group on close (a graceful leave, as ours), 20 s at most.
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
          .withTimeout(java.time.Duration.ofSeconds(20)));
      stopped.countDown();
    }));
    streams.start();
    stopped.await();
  }
}
