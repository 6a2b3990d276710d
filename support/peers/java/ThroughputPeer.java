import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Produce/consume throughput of the stock Java client on partition 0 of one topic (bench/relay.py).
 * One-shot like ProducerPeer: it does not read stdin. The clock runs inside the JVM, so JVM start,
 * class loading and client construction are outside the timed window. The producer's first metadata
 * round trip is outside too (partitionsFor before the clock); the consumer's is inside (its first
 * poll), as librdkafka's consumer in bench/relay.py: one round trip against seconds of transfer.
 *
 * Usage: ThroughputPeer produce --bootstrap B --topic T --count N --size S [--timeout-s 600]
 *   acks=1, linger.ms=5, batch.size=1000000, no idempotence; N records of S random bytes (one value,
 *   reused, no key) to partition 0, then flush.
 *   -> {"event":"produced","records":N,"seconds":E,"failed":F,"first_error":...}; exit 0 iff F == 0.
 * Usage: ThroughputPeer consume --bootstrap B --topic T --count N [--timeout-s 600]
 *   assign() partition 0 from offset 0 (no group), fetch.max.bytes 50 MB, max.partition.fetch.bytes
 *   10 MB, max.poll.records 10000; polls until N records arrived.
 *   -> {"event":"consumed","records":R,"bytes":B,"seconds":E}; exit 0 iff R >= N.
 */
public final class ThroughputPeer {
    private ThroughputPeer() {
    }

    public static void main(String[] argv) throws Exception {
        PeerIO.init();
        PeerIO.Args args = new PeerIO.Args(argv);
        if (args.positional.size() != 1) {
            throw new IllegalArgumentException("usage: ThroughputPeer produce|consume --bootstrap B --topic T --count N");
        }
        String mode = args.positional.get(0);
        int exit;
        try {
            if (mode.equals("produce")) {
                exit = produce(args);
            } else if (mode.equals("consume")) {
                exit = consume(args);
            } else {
                throw new IllegalArgumentException("unknown mode " + mode);
            }
        } catch (Throwable t) {
            PeerIO.error(t);
            t.printStackTrace();
            exit = 1;
        }
        System.exit(exit);
    }

    static int produce(PeerIO.Args args) {
        String topic = args.require("topic");
        long count = Long.parseLong(args.require("count"));
        int size = Integer.parseInt(args.require("size"));
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.require("bootstrap"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.ACKS_CONFIG, "1");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "1000000");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "false");
        // 512 MB: as librdkafka's queue.buffering.max.kbytes=1 GB in bench/relay.py, large enough that
        // send() is paced by the broker's acks, not by a small pool (the JVM gets -Xmx to match).
        p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, String.valueOf(512L * 1024 * 1024));
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "120000");
        byte[] value = new byte[size];
        new Random(17).nextBytes(value);
        AtomicLong failed = new AtomicLong();
        AtomicReference<String> firstError = new AtomicReference<>();
        double seconds;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.partitionsFor(topic);  // metadata before the clock
            long start = System.nanoTime();
            for (long i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, value), (meta, err) -> {
                    if (err != null) {
                        failed.incrementAndGet();
                        firstError.compareAndSet(null, err.toString());
                    }
                });
            }
            producer.flush();
            seconds = (System.nanoTime() - start) / 1e9;
        }
        PeerIO.emit("produced", "records", count, "seconds", seconds, "failed", failed.get(),
                "first_error", firstError.get());
        return failed.get() == 0 ? 0 : 1;
    }

    static int consume(PeerIO.Args args) {
        String topic = args.require("topic");
        long count = Long.parseLong(args.require("count"));
        double timeout = args.getDouble("timeout-s", 600);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args.require("bootstrap"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_BYTES_CONFIG, "52428800");
        p.put(ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, "10485760");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "10000");
        long got = 0;
        long bytes = 0;
        double seconds;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seek(tp, 0);
            long start = System.nanoTime();
            long deadline = start + (long) (timeout * 1e9);
            while (got < count && System.nanoTime() < deadline) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofSeconds(1));
                for (var r : records) {
                    got++;
                    bytes += r.value() == null ? 0 : r.value().length;
                }
            }
            seconds = (System.nanoTime() - start) / 1e9;
        }
        PeerIO.emit("consumed", "records", got, "bytes", bytes, "seconds", seconds);
        return got >= count ? 0 : 1;
    }
}
