package kft.bench;

import java.nio.ByteBuffer;
import java.util.function.BiConsumer;
import java.util.function.Function;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serializer;

/** A Serde for a value of a fixed number of bytes, written and read through a ByteBuffer (big-endian): the anchors' store values. */
final class FixedSerde<T> implements Serde<T> {
  private final int size;
  private final BiConsumer<ByteBuffer, T> write;
  private final Function<ByteBuffer, T> read;

  FixedSerde(int size, BiConsumer<ByteBuffer, T> write, Function<ByteBuffer, T> read) {
    this.size = size;
    this.write = write;
    this.read = read;
  }

  @Override
  public Serializer<T> serializer() {
    return (topic, value) -> {
      if (value == null) return null;
      ByteBuffer b = ByteBuffer.allocate(size);
      write.accept(b, value);
      return b.array();
    };
  }

  @Override
  public Deserializer<T> deserializer() {
    return (topic, bytes) -> bytes == null ? null : read.apply(ByteBuffer.wrap(bytes));
  }
}
