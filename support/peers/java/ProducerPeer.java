import java.nio.charset.StandardCharsets;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The stock Java producer with its defaults (idempotence on, acks=all): sends COUNT keyed records
 * "KEY_PREFIX000000".."KEY_PREFIX(COUNT-1)" to TOPIC, flushes, and reports what was acknowledged.
 *
 * Usage: ProducerPeer --bootstrap B --topic T --count N [--key-prefix P] [--pause-every N --pause-ms MS]
 * (the pause spreads the sends over time, e.g. across leader changes a test makes meanwhile)
 *   -> {"event":"produced","acked":N,"failed":F,"first_error":...}; exit 0 iff every record was acked.
 */
public final class ProducerPeer {
    private ProducerPeer() {
    }

    public static void main(String[] argv) throws Exception {
        PeerIO.init();
        PeerIO.Args args = new PeerIO.Args(argv);
        String topic = args.require("topic");
        int count = Integer.parseInt(args.require("count"));
        String prefix = args.get("key-prefix", "k");
        int pauseEvery = Integer.parseInt(args.get("pause-every", "0"));
        long pauseMs = Long.parseLong(args.get("pause-ms", "0"));
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args.require("bootstrap"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        AtomicInteger acked = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        AtomicReference<String> firstError = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                if (pauseEvery > 0 && i > 0 && i % pauseEvery == 0) {
                    Thread.sleep(pauseMs);
                }
                byte[] key = String.format("%s%06d", prefix, i).getBytes(StandardCharsets.UTF_8);
                byte[] value = ("value-" + i).getBytes(StandardCharsets.UTF_8);
                producer.send(new ProducerRecord<>(topic, key, value), (meta, err) -> {
                    if (err == null) {
                        acked.incrementAndGet();
                    } else {
                        failed.incrementAndGet();
                        firstError.compareAndSet(null, err.toString());
                    }
                });
            }
            producer.flush();
        }
        PeerIO.emit("produced", "acked", acked.get(), "failed", failed.get(), "first_error", firstError.get());
        System.exit(acked.get() == count ? 0 : 1);
    }
}
