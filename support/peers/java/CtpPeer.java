import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The classic exactly-once consume-transform-produce loop (kafka-clients 4.3): a KafkaConsumer with
 * isolation.level=read_committed and auto-commit off, and a transactional KafkaProducer.
 *
 * poll -> beginTransaction (at the first records of a transaction) -> send each record, transformed, to
 * the output topic -> after --commit-interval-ms: sendOffsetsToTransaction(offsets, consumer.groupMetadata())
 * -> commitTransaction. The open transaction is also committed in onPartitionsRevoked (before the
 * partitions go, as Kafka Streams does) and aborted in onPartitionsLost.
 *
 * Errors, as Kafka's examples/ExactlyOnceMessageProcessor and Kafka Streams handle them:
 * - an abortable error (CommitFailedException for a refused TxnOffsetCommit, ...): abortTransaction, then
 *   rewind the consumer to the group's committed offsets;
 * - a fatal producer error (ProducerFencedException, InvalidProducerEpochException,
 *   OutOfOrderSequenceException (UnknownProducerIdException is one), UnsupportedVersionException,
 *   AuthorizationException, or a TimeoutException from commit/abort, whose outcome is unknown): close
 *   the producer, create a new one with the same transactional.id (initTransactions bumps the epoch and
 *   ends the open transaction) and rewind the consumer to the committed offsets.
 * - FencedInstanceIdException from the consumer: exit 3.
 *
 * Args: --bootstrap B --group G --input T --output O [--group-protocol classic|consumer]
 *       [--instance-id ID] [--client-id C] [--transactional-id X (default G-C or G-<pid>)]
 *       [--assignor range|roundrobin|sticky|cooperative-sticky (classic only)]
 *       [--commit-interval-ms 100] [--max-txn-records N (also end a transaction once it holds N records)]
 *       [--abort-every N (abort every Nth transaction, 0 never)]
 *       [--max-poll-records 500] [--poll-ms 100] [--transaction-timeout-ms 30000]
 *       [--session-timeout-ms N] [--heartbeat-interval-ms N] [--max-seconds S] [--max-block-ms 30000]
 *       [--metadata-recovery-strategy none|rebootstrap] (both clients; none keeps the cached cluster view
 *       while kcoord, every broker address they know, is down)
 *       [--command-config FILE] (both clients: settings from a properties file, e.g. security.protocol, sasl.*, ssl.*)
 *
 * Output records: key = the input key, value = "topic-partition@offset|" + the input value, so a reader
 * can check each input record appears exactly once.
 *
 * Events (one JSON line each): started, assigned, revoked, lost (partitions, generation), txn_committed
 * (n = committed so far, aborted = aborted so far, records, offsets {tp: next offset}, generation, ms),
 * txn_aborted (n = aborted so far, committed, cause requested|error|lost|fatal, error = the exception's
 * class, message, records, offsets, generation, uncertain = the outcome is the new producer's to
 * decide), fenced (a fatal producer error: error, message), producer_recreated (count), rewound
 * (offsets it seeked to), error, stopping (committed, aborted, fenced), closed.
 */
public final class CtpPeer {
    private final PeerIO.Args args;
    private final String outputTopic;
    private final long commitIntervalMs;
    private final int abortEvery;
    private final int maxTxnRecords;
    private final Properties producerConfig;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private KafkaProducer<byte[], byte[]> producer;

    private boolean inTxn;
    private long txnStartedAt;
    private int txnRecords;
    private final Map<TopicPartition, OffsetAndMetadata> pending = new LinkedHashMap<>();
    private long attempts;
    private long committed;
    private long aborted;
    private long fenced;
    private long recreated;
    private boolean needRewind;

    private CtpPeer(PeerIO.Args a) {
        this.args = a;
        this.outputTopic = a.require("output");
        this.commitIntervalMs = a.getInt("commit-interval-ms", 100);
        this.abortEvery = a.getInt("abort-every", 0);
        this.maxTxnRecords = a.getInt("max-txn-records", 0);
        this.producerConfig = producerConfig(a);
        this.consumer = new KafkaConsumer<>(consumerConfig(a));
    }

    public static void main(String[] argv) {
        PeerIO.init();
        PeerIO.Args args = new PeerIO.Args(argv);
        int exit = 0;
        CtpPeer peer = null;
        try {
            peer = new CtpPeer(args);
            exit = peer.run();
        } catch (Throwable t) {
            PeerIO.error(t);
            t.printStackTrace();
            exit = 1;
        } finally {
            if (peer != null) {
                peer.close();
            }
            PeerIO.emit("closed", "exitCode", exit);
        }
        System.exit(exit);
    }

    static Properties consumerConfig(PeerIO.Args a) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.require("group"));
        String protocol = a.get("group-protocol", "classic");
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(a.getInt("max-poll-records", 500)));
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, ConsumerPeer.assignorClass(a.get("assignor", "range")));
            int session = a.getInt("session-timeout-ms", 10000);
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, String.valueOf(session));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
                    String.valueOf(a.getInt("heartbeat-interval-ms", Math.max(100, Math.min(3000, session / 3)))));
        }
        if (a.options.containsKey("instance-id")) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, a.get("instance-id", null));
        }
        if (a.options.containsKey("client-id")) {
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, a.get("client-id", null) + "-consumer");
        }
        if (a.options.containsKey("metadata-recovery-strategy")) {
            p.put("metadata.recovery.strategy", a.get("metadata-recovery-strategy", null));
        }
        return PeerIO.withCommandConfig(p, a);
    }

    static Properties producerConfig(PeerIO.Args a) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        String suffix = a.get("client-id", String.valueOf(ProcessHandle.current().pid()));
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.get("transactional-id", a.require("group") + "-" + suffix));
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, String.valueOf(a.getInt("transaction-timeout-ms", 30000)));
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, String.valueOf(a.getInt("max-block-ms", 30000)));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        if (a.options.containsKey("client-id")) {
            p.put(ProducerConfig.CLIENT_ID_CONFIG, a.get("client-id", null) + "-producer");
        }
        if (a.options.containsKey("metadata-recovery-strategy")) {
            p.put("metadata.recovery.strategy", a.get("metadata-recovery-strategy", null));
        }
        return PeerIO.withCommandConfig(p, a);
    }

    private int run() throws InterruptedException {
        String input = args.require("input");
        PeerIO.watchStdin(null, null);
        PeerIO.stopAfter(args.getDouble("max-seconds", 0), null);
        PeerIO.emit("started", "group", args.require("group"), "input", input, "output", outputTopic,
                "protocol", args.get("group-protocol", "classic"), "instanceId", args.get("instance-id", null),
                "transactionalId", producerConfig.get(ProducerConfig.TRANSACTIONAL_ID_CONFIG),
                "commitIntervalMs", commitIntervalMs, "abortEvery", abortEvery);
        newProducer();
        consumer.subscribe(List.of(input.split(",")), new Listener());
        long pollMs = args.getInt("poll-ms", 100);
        while (!PeerIO.stopRequested()) {
            try {
                long wait = pollMs;
                if (inTxn) {
                    wait = Math.max(1, Math.min(pollMs, txnStartedAt + commitIntervalMs - System.currentTimeMillis()));
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(wait));
                if (needRewind) {
                    // a transaction ended badly inside poll (in a rebalance callback): what this poll
                    // returned came from positions past the committed offsets
                    rewind();
                    continue;
                }
                if (!records.isEmpty()) {
                    process(records);
                }
                if (inTxn && maxTxnRecords > 0 && txnRecords >= maxTxnRecords) {
                    endTransaction("size");
                } else if (inTxn && System.currentTimeMillis() - txnStartedAt >= commitIntervalMs) {
                    endTransaction("interval");
                }
                if (needRewind) {
                    rewind();
                }
            } catch (FencedInstanceIdException e) {
                PeerIO.emit("fenced", "error", e.getClass().getSimpleName(), "message", e.getMessage(), "by", "consumer");
                return 3;
            } catch (KafkaException e) {
                // from poll or the producer's send: end the open transaction, start again from the committed offsets
                PeerIO.emit("error", "error", e.getClass().getName(), "message", String.valueOf(e.getMessage()));
                if (inTxn) {
                    abort("error", e);
                }
                needRewind = true;
                safeRewind();
                PeerIO.awaitStop(100);
            }
        }
        if (inTxn) {
            try {
                endTransaction("stop");
            } catch (KafkaException e) {
                PeerIO.emit("error", "error", e.getClass().getName(), "message", String.valueOf(e.getMessage()));
            }
        }
        PeerIO.emit("stopping", "committed", committed, "aborted", aborted, "fenced", fenced, "attempts", attempts);
        return 0;
    }

    private void process(ConsumerRecords<byte[], byte[]> records) {
        if (!inTxn) {
            producer.beginTransaction();
            inTxn = true;
            txnStartedAt = System.currentTimeMillis();
            txnRecords = 0;
            pending.clear();
        }
        for (ConsumerRecord<byte[], byte[]> r : records) {
            String origin = r.topic() + "-" + r.partition() + "@" + r.offset() + "|";
            byte[] prefix = origin.getBytes(StandardCharsets.UTF_8);
            byte[] value = r.value() == null ? new byte[0] : r.value();
            byte[] out = new byte[prefix.length + value.length];
            System.arraycopy(prefix, 0, out, 0, prefix.length);
            System.arraycopy(value, 0, out, prefix.length, value.length);
            producer.send(new ProducerRecord<>(outputTopic, r.key(), out));
            pending.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            txnRecords++;
        }
    }

    /** Commit (or, every --abort-every'th, abort) the open transaction. */
    private void endTransaction(String why) {
        if (!inTxn) {
            return;
        }
        attempts++;
        if (abortEvery > 0 && attempts % abortEvery == 0) {
            abort("requested", null);
            return;
        }
        ConsumerGroupMetadata meta = consumer.groupMetadata();
        long started = System.nanoTime();
        try {
            producer.sendOffsetsToTransaction(new LinkedHashMap<>(pending), meta);
            producer.commitTransaction();
        } catch (ProducerFencedException | InvalidProducerEpochException | OutOfOrderSequenceException
                 | UnsupportedVersionException | AuthorizationException
                 | TimeoutException | IllegalStateException e) {
            fatal(e, meta);
            return;
        } catch (KafkaException e) {
            abort("error", e);
            return;
        }
        committed++;
        PeerIO.emit("txn_committed", "n", committed, "aborted", aborted, "records", txnRecords, "offsets", names(pending),
                "generation", meta.generationId(), "memberId", meta.memberId(), "why", why,
                "ms", (System.nanoTime() - started) / 1_000_000.0);
        inTxn = false;
        pending.clear();
    }

    /** abortTransaction; the consumer goes back to the committed offsets. */
    private void abort(String cause, Exception error) {
        ConsumerGroupMetadata meta = consumer.groupMetadata();
        try {
            producer.abortTransaction();
        } catch (KafkaException | IllegalStateException e) {
            fatal(e, meta, cause, error);
            return;
        }
        aborted++;
        emitAborted(cause, error, meta, false);
        inTxn = false;
        pending.clear();
        needRewind = true;
    }

    private void fatal(RuntimeException e, ConsumerGroupMetadata meta) {
        fatal(e, meta, "fatal", e);
    }

    /** The producer cannot go on: a new one with the same transactional.id ends what the old one left open. */
    private void fatal(RuntimeException e, ConsumerGroupMetadata meta, String cause, Exception error) {
        fenced++;
        PeerIO.emit("fenced", "error", e.getClass().getSimpleName(), "message", String.valueOf(e.getMessage()),
                "fencedCount", fenced, "by", "producer");
        if (inTxn) {
            aborted++;
            // a TimeoutException from commitTransaction may hide a commit that completed: the new
            // producer's InitProducerId decides; the rewind reads whatever offsets it left.
            emitAborted(cause, error != null ? error : e, meta, e instanceof TimeoutException);
        }
        inTxn = false;
        pending.clear();
        try {
            producer.close(Duration.ZERO);
        } catch (Throwable t) {
            PeerIO.emit("close_error", "error", t.getClass().getSimpleName(), "message", String.valueOf(t.getMessage()));
        }
        newProducer();
        needRewind = true;
    }

    private void emitAborted(String cause, Exception error, ConsumerGroupMetadata meta, boolean uncertain) {
        PeerIO.emit("txn_aborted", "n", aborted, "committed", committed, "cause", cause,
                "error", error == null ? null : error.getClass().getSimpleName(),
                "message", error == null ? null : String.valueOf(error.getMessage()),
                "records", txnRecords, "offsets", names(pending), "generation", meta.generationId(),
                "memberId", meta.memberId(), "uncertain", uncertain);
    }

    private void newProducer() {
        while (true) {
            KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(producerConfig);
            try {
                p.initTransactions();
                producer = p;
                recreated++;
                if (recreated > 1) {
                    PeerIO.emit("producer_recreated", "count", recreated - 1);
                }
                return;
            } catch (TimeoutException e) {
                PeerIO.emit("error", "error", e.getClass().getName(), "message", "initTransactions: " + e.getMessage());
                p.close(Duration.ZERO);
                if (PeerIO.stopRequested()) {
                    throw e;
                }
            }
        }
    }

    /** Seek every assigned partition to the group's committed offset (the beginning if it has none). */
    private void rewind() {
        Set<TopicPartition> assigned = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> offsets = consumer.committed(assigned, Duration.ofSeconds(30));
        Map<String, Object> to = new TreeMap<>();
        List<TopicPartition> none = new ArrayList<>();
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata om = offsets.get(tp);
            if (om == null) {
                none.add(tp);
                to.put(tp.toString(), null);
            } else {
                consumer.seek(tp, om);
                to.put(tp.toString(), om.offset());
            }
        }
        if (!none.isEmpty()) {
            consumer.seekToBeginning(none);
        }
        needRewind = false;
        PeerIO.emit("rewound", "offsets", to);
    }

    private void safeRewind() {
        try {
            rewind();
        } catch (KafkaException e) {
            PeerIO.emit("error", "error", e.getClass().getName(), "message", "rewind: " + e.getMessage());
        }
    }

    private void close() {
        try {
            consumer.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.DEFAULT)
                    .withTimeout(Duration.ofSeconds(10)));
        } catch (Throwable t) {
            PeerIO.emit("close_error", "error", t.getClass().getSimpleName(), "message", String.valueOf(t.getMessage()));
        }
        if (producer != null) {
            try {
                producer.close(Duration.ofSeconds(10));
            } catch (Throwable t) {
                PeerIO.emit("close_error", "error", t.getClass().getSimpleName(), "message", String.valueOf(t.getMessage()));
            }
        }
    }

    static Map<String, Object> names(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<String, Object> out = new TreeMap<>();
        offsets.forEach((tp, om) -> out.put(tp.toString(), om.offset()));
        return out;
    }

    static List<String> names(Collection<TopicPartition> parts) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : parts) {
            out.add(tp.toString());
        }
        out.sort(null);
        return out;
    }

    /** Callbacks run inside poll() on the polling thread, where the producer is used too. */
    private final class Listener implements ConsumerRebalanceListener {
        private final Set<TopicPartition> owned = new HashSet<>();

        private void emit(String event, Collection<TopicPartition> partitions) {
            ConsumerGroupMetadata meta = consumer.groupMetadata();
            PeerIO.emit(event, "partitions", names(partitions), "current", names(owned),
                    "generation", meta.generationId(), "memberId", meta.memberId());
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            // commit before the partitions go (Kafka Streams commits its tasks here)
            if (inTxn && !partitions.isEmpty()) {
                endTransaction("revoked");
            }
            owned.removeAll(partitions);
            emit("revoked", partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            // someone else may own them already: their offsets must not be committed
            if (inTxn && !partitions.isEmpty()) {
                abort("lost", null);
            }
            owned.removeAll(partitions);
            emit("lost", partitions);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            owned.addAll(partitions);
            emit("assigned", partitions);
        }
    }
}
