package kft.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
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
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The Kafka Streams anchor of bench:throughput: per key, a running total of `amount` and a count
 * of records, in a state store with a changelog, exactly-once v2, commit interval 1 s. The same
 * aggregation as bench/flows/totals.ts over the records of bench/lib/records.ts
 * (key "k<i % keys>", value {"n": i, "amount": a}).
 *
 * Usage: java -jar kafka-streams-anchor.jar <bootstrap> <application.id> <input topic> <state dir> [threads] [output topic]
 *
 * With an output topic (bench:outputs), every record's new totals also go out as one output record,
 * keyed by the input key, value {"key","n","count","total"} as JSON — what bench/flows/totals.ts
 * emits per record — in the same exactly-once transactions; the store's record cache is off, so
 * each input record forwards its update (the cache would fold several updates of a key into one).
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

  /** The totals with the `n` of the last record folded (the output mode). */
  record TotalsN(long count, long total, long n) {}

  /** Totals as 16 bytes: count, then total. */
  static final Serde<Totals> TOTALS = new FixedSerde<>(16, (b, t) -> b.putLong(t.count()).putLong(t.total()), b -> new Totals(b.getLong(), b.getLong()));

  /** TotalsN as 24 bytes: count, total, n. */
  static final Serde<TotalsN> TOTALS_N =
      new FixedSerde<>(24, (b, t) -> b.putLong(t.count()).putLong(t.total()).putLong(t.n()), b -> new TotalsN(b.getLong(), b.getLong(), b.getLong()));

  /** (n, amount) between the parse and the aggregation (the output mode's repartition-free groupByKey): 16 bytes. */
  static final Serde<long[]> N_AMOUNT = new FixedSerde<>(16, (b, v) -> b.putLong(v[0]).putLong(v[1]), b -> new long[] {b.getLong(), b.getLong()});

  static void firstRecord(java.util.concurrent.atomic.AtomicBoolean first) {
    if (first.get() && first.compareAndSet(true, false)) {
      System.out.println("FIRST_RECORD " + System.currentTimeMillis());
      System.out.flush();
    }
  }

  static JsonNode parse(ObjectMapper json, byte[] value) {
    try {
      return json.readTree(value);
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("not a record of bench/lib/records.ts", e);
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 4) {
      System.err.println("usage: TotalsApp <bootstrap> <application.id> <input topic> <state dir> [threads] [output topic]");
      System.exit(2);
    }
    String bootstrap = args[0];
    String applicationId = args[1];
    String topic = args[2];
    String stateDir = args[3];
    int threads = args.length > 4 ? Integer.parseInt(args[4]) : 1;
    String outputTopic = args.length > 5 ? args[5] : null;

    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 1000);
    props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, threads);
    props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    if (outputTopic != null) props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);

    ObjectMapper json = new ObjectMapper();
    java.util.concurrent.atomic.AtomicBoolean first = new java.util.concurrent.atomic.AtomicBoolean(true);
    StreamsBuilder builder = new StreamsBuilder();
    if (outputTopic == null) {
      builder
          .stream(topic, Consumed.with(Serdes.String(), Serdes.ByteArray()))
          .mapValues(value -> {
            firstRecord(first);
            return parse(json, value).get("amount").asLong();
          })
          .groupByKey(Grouped.with(Serdes.String(), Serdes.Long()))
          .aggregate(
              () -> new Totals(0, 0),
              (key, amount, totals) -> new Totals(totals.count() + 1, totals.total() + amount),
              Materialized.<String, Totals, KeyValueStore<Bytes, byte[]>>as("totals")
                  .withKeySerde(Serdes.String())
                  .withValueSerde(TOTALS));
    } else {
      builder
          .stream(topic, Consumed.with(Serdes.String(), Serdes.ByteArray()))
          .mapValues(value -> {
            firstRecord(first);
            JsonNode node = parse(json, value);
            return new long[] {node.get("n").asLong(), node.get("amount").asLong()};
          })
          .groupByKey(Grouped.with(Serdes.String(), N_AMOUNT))
          .aggregate(
              () -> new TotalsN(0, 0, -1),
              (key, nAmount, totals) -> new TotalsN(totals.count() + 1, totals.total() + nAmount[1], nAmount[0]),
              Materialized.<String, TotalsN, KeyValueStore<Bytes, byte[]>>as("totals")
                  .withKeySerde(Serdes.String())
                  .withValueSerde(TOTALS_N))
          .toStream()
          .mapValues((key, t) -> {
            java.util.Map<String, Object> out = new java.util.LinkedHashMap<>();
            out.put("key", key);
            out.put("n", t.n());
            out.put("count", t.count());
            out.put("total", t.total());
            try {
              return json.writeValueAsBytes(out);
            } catch (java.io.IOException e) {
              throw new IllegalStateException(e);
            }
          })
          .to(outputTopic, org.apache.kafka.streams.kstream.Produced.with(Serdes.String(), Serdes.ByteArray()));
    }

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
