package kft.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.ByteBuffer;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The Kafka Streams anchor of bench:throughput: per key, a running total of `amount` and a count
 * of records, in a state store with a changelog, exactly-once v2, commit interval 1 s. The same
 * aggregation as bench/flows/totals.ts over the records of bench/lib/records.ts
 * (key "k<i % keys>", value {"n": i, "amount": a}).
 *
 * Usage: java -jar kafka-streams-anchor.jar <bootstrap> <application.id> <input topic> <state dir> [threads]
 *
 * It runs until SIGTERM; the driver (bench/lib/anchors.ts) decides when it is done by watching the
 * group's committed offsets reach the input's end offsets, the same criterion as every contestant.
 * Prints "STATE <new state> <epoch ms>" on each state change, so the driver can tell start-up time,
 * and "FIRST_RECORD <epoch ms>" when the first record passes mapValues: the start of the driver's
 * steady-state window (start-up — JVM, group join, task and store creation — is behind it).
 */
public final class TotalsApp {

  /** Running totals of one key: 16 bytes, count then total, both big-endian longs. */
  record Totals(long count, long total) {}

  static final class TotalsSerde implements Serde<Totals> {
    @Override
    public Serializer<Totals> serializer() {
      return (topic, t) -> t == null ? null : ByteBuffer.allocate(16).putLong(t.count()).putLong(t.total()).array();
    }

    @Override
    public Deserializer<Totals> deserializer() {
      return (topic, bytes) -> {
        if (bytes == null) return null;
        ByteBuffer b = ByteBuffer.wrap(bytes);
        return new Totals(b.getLong(), b.getLong());
      };
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 4) {
      System.err.println("usage: TotalsApp <bootstrap> <application.id> <input topic> <state dir> [threads]");
      System.exit(2);
    }
    String bootstrap = args[0];
    String applicationId = args[1];
    String topic = args[2];
    String stateDir = args[3];
    int threads = args.length > 4 ? Integer.parseInt(args[4]) : 1;

    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 1000);
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

    ObjectMapper json = new ObjectMapper();
    java.util.concurrent.atomic.AtomicBoolean first = new java.util.concurrent.atomic.AtomicBoolean(true);
    Serde<Totals> totalsSerde = new TotalsSerde();
    StreamsBuilder builder = new StreamsBuilder();
    builder
        .stream(topic, Consumed.with(Serdes.String(), Serdes.ByteArray()))
        .mapValues(value -> {
          if (first.get() && first.compareAndSet(true, false)) {
            System.out.println("FIRST_RECORD " + System.currentTimeMillis());
            System.out.flush();
          }
          try {
            JsonNode node = json.readTree(value);
            return node.get("amount").asLong();
          } catch (java.io.IOException e) {
            throw new IllegalArgumentException("not a record of bench/lib/records.ts", e);
          }
        })
        .groupByKey(Grouped.with(Serdes.String(), Serdes.Long()))
        .aggregate(
            () -> new Totals(0, 0),
            (key, amount, totals) -> new Totals(totals.count() + 1, totals.total() + amount),
            Materialized.<String, Totals, KeyValueStore<Bytes, byte[]>>as("totals")
                .withKeySerde(Serdes.String())
                .withValueSerde(totalsSerde));

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
    // Leave the group on close, so the driver can delete the group right after the run.
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
          .withTimeout(java.time.Duration.ofSeconds(20)));
      stopped.countDown();
    }));
    streams.start();
    stopped.await();
  }
}
