package kft.bench;

import java.util.Arrays;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client's side of bench:persist's experiment A: small transactions one at a time, each a
 * ~100-byte record to partition 0 of `topic` plus an offset commit for `group` (what one snapshot
 * write of this project is), on the same broker in the same run. One warm-up transaction, then
 * `transactions` timed ones; prints one JSON line: total ms, median and p90 ms per transaction.
 * Usage: TxnLatency <brokers> <topic> <group> <transactions> <retry.backoff.ms or "default">
 */
public final class TxnLatency {
  public static void main(String[] args) throws Exception {
    String brokers = args[0];
    String topic = args[1];
    String group = args[2];
    int n = Integer.parseInt(args[3]);
    Properties p = new Properties();
    p.put("bootstrap.servers", brokers);
    p.put("transactional.id", topic + "-java-tx");
    p.put("key.serializer", ByteArraySerializer.class.getName());
    p.put("value.serializer", ByteArraySerializer.class.getName());
    p.put("linger.ms", "0");
    if (!"default".equals(args[4])) {
      // The wait for the previous transaction's markers is answered CONCURRENT_TRANSACTIONS and
      // retried after retry.backoff.ms (100 ms by default): the floor needs a short one.
      p.put("retry.backoff.ms", args[4]);
      p.put("retry.backoff.max.ms", args[4]);
    }
    byte[] value = new byte[100];
    Arrays.fill(value, (byte) 'x');
    TopicPartition input = new TopicPartition(topic, 0);
    ConsumerGroupMetadata metadata = new ConsumerGroupMetadata(group);
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
      producer.initTransactions();
      long[] each = new long[n];
      long started = 0;
      for (int i = -1; i < n; i++) {
        if (i == 0) started = System.nanoTime();
        long t0 = System.nanoTime();
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(topic, 0, ("key" + i).getBytes(), value));
        producer.sendOffsetsToTransaction(Map.of(input, new OffsetAndMetadata(i + 2)), metadata);
        producer.commitTransaction();
        if (i >= 0) each[i] = System.nanoTime() - t0;
      }
      long total = System.nanoTime() - started;
      Arrays.sort(each);
      System.out.printf("{\"ms\":%.3f,\"median_ms\":%.3f,\"p90_ms\":%.3f}%n", total / 1e6, each[n / 2] / 1e6, each[(n * 9) / 10] / 1e6);
    }
  }
}
