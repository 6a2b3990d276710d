import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A stock Java KafkaConsumer (classic group protocol, or KIP-848's with --group-protocol consumer) that
 * reports what the coordinator does to it.
 *
 * Args: --bootstrap B --group G (--topic T[,T2] | --pattern REGEX | --subscription-pattern RE2) [--instance-id ID] [--client-id C]
 *       [--assignor range|roundrobin|sticky|cooperative-sticky] [--session-timeout-ms N]
 *       [--heartbeat-interval-ms N] [--max-poll-interval-ms N] [--commit] [--max-records N]
 *       [--max-poll-records N] [--auto-offset-reset earliest|latest] [--close leave|remain|default]
 *       [--max-seconds S] [--poll-ms N] [--metadata-recovery-strategy none|rebootstrap]
 *       [--work-ms N] (sleep N ms after handling each non-empty poll: a consumer that is still busy with
 *       its records when it is killed) [--commit-processed]
 *       [--command-config FILE] (client settings from a properties file: security.protocol, sasl.*, ssl.*)
 * Events: started, assigned, revoked, lost, records, committed, commit_failed, fenced, error, closed.
 * Partitions are written "topic-partition".
 *
 * --commit-processed (instead of --commit): after every non-empty poll, commitSync exactly the records
 * that poll returned (last offset + 1 of each partition in it), and report everything needed to audit
 * the commit: a "delivered" event per poll with each partition's record keys (decimal keys, e.g. from
 * tests.support.workload's numbered producer; null for other keys) and offsets; "committed" with the
 * member epoch; "commit_failed" for EVERY failure (any KafkaException: kafka-clients 4.3 answers a
 * STALE_MEMBER_EPOCH to commitSync with CommitFailedException, without retrying) with the exception
 * class and message, the committed partitions, and what the consumer owned when the commit was sent and
 * when the failure was seen (both from the rebalance listener's callbacks, and consumer.assignment()).
 * A stop request then no longer wakes the consumer up (that could interrupt a commitSync and leave
 * processed records uncommitted): the loop ends after the current poll (--poll-ms) instead.
 */
public final class ConsumerPeer {
    private ConsumerPeer() {
    }

    public static void main(String[] argv) {
        PeerIO.init();
        PeerIO.Args args = new PeerIO.Args(argv);
        int exit = 0;
        KafkaConsumer<byte[], byte[]> consumer = null;
        try {
            consumer = new KafkaConsumer<>(config(args));
            exit = run(consumer, args);
        } catch (Throwable t) {
            PeerIO.error(t);
            t.printStackTrace();
            exit = 1;
        } finally {
            if (consumer != null) {
                close(consumer, args.get("close", "default"));
            }
            PeerIO.emit("closed", "exitCode", exit);
        }
        System.exit(exit);
    }

    static Properties config(PeerIO.Args a) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.require("group"));
        // --group-protocol consumer: KIP-848 (the coordinator assigns; the classic settings below are refused then)
        String protocol = a.get("group-protocol", "classic");
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, a.get("auto-offset-reset", "earliest"));
        if (protocol.equals("classic")) {
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignorClass(a.get("assignor", "range")));
            int session = a.getInt("session-timeout-ms", 10000);
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, String.valueOf(session));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
                    String.valueOf(a.getInt("heartbeat-interval-ms", Math.max(100, Math.min(3000, session / 3)))));
        } else if (a.options.containsKey("remote-assignor")) {
            p.put("group.remote.assignor", a.get("remote-assignor", null));
        }
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, String.valueOf(a.getInt("max-poll-interval-ms", 300000)));
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(a.getInt("max-poll-records", 500)));
        if (a.options.containsKey("instance-id")) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, a.get("instance-id", null));
        }
        if (a.options.containsKey("client-id")) {
            p.put(ConsumerConfig.CLIENT_ID_CONFIG, a.get("client-id", null));
        }
        if (a.options.containsKey("metadata-recovery-strategy")) {
            p.put("metadata.recovery.strategy", a.get("metadata-recovery-strategy", null));
        }
        return PeerIO.withCommandConfig(p, a);
    }

    static String assignorClass(String name) {
        switch (name) {
            case "range":
                return "org.apache.kafka.clients.consumer.RangeAssignor";
            case "roundrobin":
                return "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            case "sticky":
                return "org.apache.kafka.clients.consumer.StickyAssignor";
            case "cooperative-sticky":
                return "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            default:
                throw new IllegalArgumentException("unknown assignor " + name);
        }
    }

    static int run(KafkaConsumer<byte[], byte[]> consumer, PeerIO.Args a) {
        // --pattern REGEX: subscribe(Pattern) (the consumer protocol sends it as SubscribedTopicRegex)
        // --subscription-pattern RE2: subscribe(SubscriptionPattern), resolved by the coordinator (KIP-848)
        String pattern = a.get("pattern", null);
        String subscriptionPattern = a.get("subscription-pattern", null);
        List<String> topics = pattern == null && subscriptionPattern == null ? Arrays.asList(a.require("topic").split(",")) : List.of();
        int maxRecords = a.getInt("max-records", -1);
        boolean commit = a.flag("commit");
        boolean commitProcessed = a.flag("commit-processed");
        Duration pollTimeout = Duration.ofMillis(a.getInt("poll-ms", 200));
        int workMs = a.getInt("work-ms", 0);
        Runnable onStop = commitProcessed ? null : consumer::wakeup;
        PeerIO.watchStdin(onStop, consumer::wakeup);
        PeerIO.stopAfter(a.getDouble("max-seconds", 0), onStop);
        PeerIO.emit("started", "group", a.require("group"), "topics", topics, "pattern", pattern != null ? pattern : subscriptionPattern,
                "instanceId", a.get("instance-id", null), "assignor", a.get("assignor", "range"));
        if (subscriptionPattern != null) {
            consumer.subscribe(new SubscriptionPattern(subscriptionPattern), new Listener(consumer));
        } else if (pattern != null) {
            consumer.subscribe(Pattern.compile(pattern), new Listener(consumer));
        } else {
            consumer.subscribe(topics, new Listener(consumer));
        }
        long total = 0;
        while (!PeerIO.stopRequested() && (maxRecords < 0 || total < maxRecords)) {
            try {
                for (String cmd : PeerIO.takeCommands()) {
                    handleCommand(consumer, cmd);
                }
                ConsumerRecords<byte[], byte[]> records = consumer.poll(pollTimeout);
                if (!records.isEmpty()) {
                    total += records.count();
                    PeerIO.emit("records", "count", records.count(), "total", total, "offsets", lastOffsets(records));
                    if (commitProcessed) {
                        commitProcessed(consumer, records);
                    } else if (commit) {
                        commitSync(consumer);
                    }
                    if (workMs > 0) {
                        Thread.sleep(workMs);
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return 0;
            } catch (WakeupException e) {
                // stop requested or a stdin command arrived; the loop condition / command queue decide
            } catch (FencedInstanceIdException e) {
                PeerIO.emit("fenced", "error", e.getClass().getSimpleName(), "message", e.getMessage());
                return 3;
            }
        }
        if (maxRecords >= 0 && total >= maxRecords) {
            PeerIO.emit("max_records", "total", total);
        }
        return 0;
    }

    /** stdin commands besides "stop": "commit" (sync commit now) and "enforce-rebalance". */
    static void handleCommand(KafkaConsumer<byte[], byte[]> consumer, String cmd) {
        switch (cmd) {
            case "commit":
                commitSync(consumer);
                break;
            case "enforce-rebalance":
                consumer.enforceRebalance("requested by test");
                PeerIO.emit("rebalance_requested");
                break;
            default:
                PeerIO.emit("unknown_command", "command", cmd);
        }
    }

    /**
     * Commits the position of every assigned partition whose position the consumer already knows. A partition
     * whose position is still being looked up is skipped (nothing consumed from it yet, so nothing to commit):
     * waiting for it can hang. kafka-clients 4.3's KIP-848 consumer does not look up the position of a
     * partition pending revocation, and the revocation only runs inside poll(), so position() on a partition
     * assigned and at once taken back (a second member joining) spins until default.api.timeout.ms (60 s)
     * while the group waits for the revocation (seen on tansu, whose ListOffsets answers later).
     */
    static void commitSync(KafkaConsumer<byte[], byte[]> consumer) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        for (TopicPartition tp : consumer.assignment()) {
            try {
                offsets.put(tp, new OffsetAndMetadata(consumer.position(tp, Duration.ZERO)));
            } catch (org.apache.kafka.common.errors.TimeoutException e) {
                // position not known yet: see above
            }
        }
        try {
            consumer.commitSync(offsets);
            Map<String, Object> out = new TreeMap<>();
            offsets.forEach((tp, om) -> out.put(tp.toString(), om.offset()));
            PeerIO.emit("committed", "offsets", out);
        } catch (FencedInstanceIdException e) {
            throw e;
        } catch (CommitFailedException | RebalanceInProgressException e) {
            PeerIO.emit("commit_failed", "error", e.getClass().getSimpleName(), "message", e.getMessage());
        }
    }

    /** --commit-processed: report the poll's records, commitSync exactly them, report the outcome. */
    static void commitProcessed(KafkaConsumer<byte[], byte[]> consumer, ConsumerRecords<byte[], byte[]> records) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        Map<String, Object> keys = new TreeMap<>();
        Map<String, Object> ranges = new TreeMap<>();
        for (TopicPartition tp : records.partitions()) {
            List<ConsumerRecord<byte[], byte[]>> part = records.records(tp);
            List<Object> partKeys = new ArrayList<>(part.size());
            for (ConsumerRecord<byte[], byte[]> r : part) {
                partKeys.add(numericKey(r.key()));
            }
            keys.put(tp.toString(), partKeys);
            long first = part.get(0).offset();
            long last = part.get(part.size() - 1).offset();
            ranges.put(tp.toString(), List.of(first, last));
            offsets.put(tp, new OffsetAndMetadata(last + 1));
        }
        PeerIO.emit("delivered", "count", records.count(), "keys", keys, "ranges", ranges);
        List<String> ownedAtSend = names(Listener.OWNED);
        List<String> assignmentAtSend = names(consumer.assignment());
        int epochAtSend = consumer.groupMetadata().generationId();
        long sentAt = System.nanoTime();
        Map<String, Object> out = new TreeMap<>();
        offsets.forEach((tp, om) -> out.put(tp.toString(), om.offset()));
        try {
            consumer.commitSync(offsets);
            PeerIO.emit("committed", "offsets", out, "epoch", epochAtSend,
                    "ms", (System.nanoTime() - sentAt) / 1_000_000.0);
        } catch (FencedInstanceIdException e) {
            throw e;
        } catch (KafkaException e) {
            PeerIO.emit("commit_failed", "error", e.getClass().getSimpleName(), "message", e.getMessage(),
                    "offsets", out, "partitions", names(offsets.keySet()),
                    "ownedAtSend", ownedAtSend, "ownedAtFailure", names(Listener.OWNED),
                    "assignmentAtSend", assignmentAtSend, "assignmentAtFailure", names(consumer.assignment()),
                    "epochAtSend", epochAtSend, "epochAtFailure", consumer.groupMetadata().generationId(),
                    "ms", (System.nanoTime() - sentAt) / 1_000_000.0);
        }
    }

    /** A record key written as a decimal number (the numbered producers), else null. */
    static Object numericKey(byte[] key) {
        if (key == null) {
            return null;
        }
        try {
            return Long.parseLong(new String(key, java.nio.charset.StandardCharsets.UTF_8));
        } catch (NumberFormatException e) {
            return null;
        }
    }

    static Map<String, Object> lastOffsets(ConsumerRecords<byte[], byte[]> records) {
        Map<String, Object> out = new TreeMap<>();
        for (ConsumerRecord<byte[], byte[]> r : records) {
            out.put(r.topic() + "-" + r.partition(), r.offset());
        }
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

    static void close(KafkaConsumer<byte[], byte[]> consumer, String mode) {
        CloseOptions.GroupMembershipOperation op;
        switch (mode) {
            case "leave":
                op = CloseOptions.GroupMembershipOperation.LEAVE_GROUP;
                break;
            case "remain":
                op = CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP;
                break;
            default:
                op = CloseOptions.GroupMembershipOperation.DEFAULT;
        }
        try {
            consumer.close(CloseOptions.groupMembershipOperation(op).withTimeout(Duration.ofSeconds(10)));
        } catch (Throwable t) {
            PeerIO.emit("close_error", "error", t.getClass().getSimpleName(), "message", t.getMessage());
        }
    }

    /** Rebalance callbacks run inside poll() on the polling thread. */
    private static final class Listener implements ConsumerRebalanceListener {
        /** What the callbacks handed over and did not take back yet (callbacks and readers: the polling thread). */
        static final java.util.Set<TopicPartition> OWNED = new java.util.HashSet<>();
        private final KafkaConsumer<byte[], byte[]> consumer;

        Listener(KafkaConsumer<byte[], byte[]> consumer) {
            this.consumer = consumer;
        }

        /** "partitions" is what the callback got (incremental under cooperative-sticky); "current" the full set. */
        private void emit(String event, Collection<TopicPartition> partitions) {
            // groupMetadata() is valid inside the callback: it names the generation being joined.
            var meta = consumer.groupMetadata();
            PeerIO.emit(event, "partitions", names(partitions), "current", names(consumer.assignment()),
                    "generation", meta.generationId(), "memberId", meta.memberId());
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            OWNED.addAll(partitions);
            emit("assigned", partitions);
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            OWNED.removeAll(partitions);
            emit("revoked", partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            OWNED.removeAll(partitions);
            emit("lost", partitions);
        }
    }
}
