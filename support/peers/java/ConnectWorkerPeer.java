import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.common.utils.Utils.UncheckedCloseable;
import org.apache.kafka.connect.runtime.RestartRequest;
import org.apache.kafka.connect.runtime.SessionKey;
import org.apache.kafka.connect.runtime.TargetState;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;
import org.apache.kafka.connect.runtime.distributed.ExtendedAssignment;
import org.apache.kafka.connect.runtime.distributed.WorkerGroupMember;
import org.apache.kafka.connect.runtime.distributed.WorkerRebalanceListener;
import org.apache.kafka.connect.storage.AppliedConnectorConfig;
import org.apache.kafka.connect.storage.ClusterConfigState;
import org.apache.kafka.connect.storage.ConfigBackingStore;
import org.apache.kafka.connect.util.ConnectorTaskId;

/**
 * A Kafka Connect distributed worker's group membership, without the REST server or any connectors.
 *
 * It drives Connect's real WorkerGroupMember (WorkerCoordinator + IncrementalCooperativeAssignor,
 * protocol type "connect") the way DistributedHerder.tick() does: ensureActive, then poll; honour the
 * assignor's scheduled-rebalance delay; rejoin after an assignment that revoked something; rejoin
 * after a failed assignment. The config topic is replaced by a fixed in-memory snapshot of
 * --connectors N connectors with --tasks M tasks each, identical in every peer, so the leader's
 * assignor has work to hand out and no peer ever lags the config log.
 *
 * Args: --bootstrap B --group G [--worker-id W] [--connectors N] [--tasks M]
 *       [--protocol sessioned|compatible|eager] [--session-timeout-ms N] [--heartbeat-interval-ms N]
 *       [--rebalance-timeout-ms N] [--max-delay-ms N] [--max-seconds S]
 * stdin: "stop", or "rejoin" (member.requestRejoin()).
 * Events: started; assignment {generation, memberId, leader, leaderUrl, error, offset, version,
 *   connectors, tasks, revokedConnectors, revokedTasks, delay}; revoked {leader, connectors, tasks};
 *   rejoin {reason}; poll_timeout; error; closed. Tasks are written "connector-N".
 */
public final class ConnectWorkerPeer {
    private ConnectWorkerPeer() {
    }

    private static WorkerGroupMember member;
    private static volatile ExtendedAssignment pending;
    private static long scheduledRebalance = Long.MAX_VALUE;

    public static void main(String[] argv) {
        PeerIO.init();
        PeerIO.Args args = new PeerIO.Args(argv);
        int exit = 0;
        try {
            exit = run(args);
        } catch (Throwable t) {
            PeerIO.error(t);
            t.printStackTrace();
            exit = 1;
        } finally {
            if (member != null) {
                try {
                    member.stop();
                } catch (Throwable t) {
                    PeerIO.emit("close_error", "error", t.getClass().getSimpleName(), "message", t.getMessage());
                }
            }
            PeerIO.emit("closed", "exitCode", exit);
        }
        System.exit(exit);
    }

    static Map<String, String> workerConfig(PeerIO.Args a) {
        String group = a.require("group");
        Map<String, String> c = new HashMap<>();
        c.put("bootstrap.servers", a.require("bootstrap"));
        c.put("group.id", group);
        c.put("client.id", a.get("worker-id", "worker"));
        c.put("config.storage.topic", group + "-configs");
        c.put("offset.storage.topic", group + "-offsets");
        c.put("status.storage.topic", group + "-status");
        c.put("key.converter", "org.apache.kafka.connect.json.JsonConverter");
        c.put("value.converter", "org.apache.kafka.connect.json.JsonConverter");
        c.put("connect.protocol", a.get("protocol", "sessioned"));
        c.put("session.timeout.ms", a.get("session-timeout-ms", "10000"));
        c.put("heartbeat.interval.ms", a.get("heartbeat-interval-ms", "1000"));
        c.put("rebalance.timeout.ms", a.get("rebalance-timeout-ms", "60000"));
        c.put("scheduled.rebalance.max.delay.ms", a.get("max-delay-ms", "0"));
        c.put("metric.reporters", "");
        return c;
    }

    static int run(PeerIO.Args a) throws InterruptedException {
        String workerId = a.get("worker-id", "worker");
        DistributedConfig config = new DistributedConfig(workerConfig(a));
        FixedConfigStore store = new FixedConfigStore(a.getInt("connectors", 2), a.getInt("tasks", 2));
        String restUrl = "http://" + workerId + ":8083/";
        LogContext logContext = new LogContext("[Worker " + workerId + "] ");
        member = new WorkerGroupMember(config, restUrl, store, new Listener(), Time.SYSTEM, workerId, logContext);
        PeerIO.watchStdin(member::wakeup, member::wakeup);
        PeerIO.stopAfter(a.getDouble("max-seconds", 0), member::wakeup);
        PeerIO.emit("started", "workerId", workerId, "group", a.require("group"), "restUrl", restUrl,
                "protocol", a.get("protocol", "sessioned"), "connectors", store.snapshot().connectors().size());
        Supplier<UncheckedCloseable> onPoll = () -> () -> { };
        while (!PeerIO.stopRequested()) {
            try {
                for (String cmd : PeerIO.takeCommands()) {
                    if (cmd.equals("rejoin")) {
                        rejoin("requested by test");
                    } else {
                        PeerIO.emit("unknown_command", "command", cmd);
                    }
                }
                member.ensureActive(onPoll);
                handleRebalanceCompleted();
                long now = System.currentTimeMillis();
                long timeout = scheduledRebalance == Long.MAX_VALUE ? 1000 : Math.max(0, scheduledRebalance - now);
                member.poll(Math.min(timeout, 1000), onPoll);
                handleRebalanceCompleted();
            } catch (WakeupException e) {
                // stop requested, a stdin command, or a fresh assignment: loop around
            }
        }
        member.maybeLeaveGroup("peer stopping");
        return 0;
    }

    /** The parts of DistributedHerder.handleRebalanceCompleted that concern group membership. */
    static void handleRebalanceCompleted() {
        ExtendedAssignment assignment = pending;
        long now = System.currentTimeMillis();
        if (scheduledRebalance <= now) {
            scheduledRebalance = Long.MAX_VALUE;
            rejoin("scheduled rebalance delay expired");
            return;
        }
        if (assignment == null) {
            return;
        }
        pending = null;
        if (assignment.failed()) {
            rejoin("assignment failed with error " + assignment.error());
        } else if (!assignment.revokedConnectors().isEmpty() || !assignment.revokedTasks().isEmpty()) {
            rejoin("assignment revoked connectors/tasks; follow-up rebalance");
        }
    }

    static void rejoin(String reason) {
        PeerIO.emit("rejoin", "reason", reason);
        member.requestRejoin();
    }

    static List<String> taskNames(Collection<ConnectorTaskId> tasks) {
        List<String> out = new ArrayList<>();
        for (ConnectorTaskId t : tasks) {
            out.add(t.toString());
        }
        out.sort(null);
        return out;
    }

    static List<String> sorted(Collection<String> xs) {
        List<String> out = new ArrayList<>(xs);
        out.sort(null);
        return out;
    }

    /** Called from inside WorkerGroupMember.poll/ensureActive on the main thread. */
    private static final class Listener implements WorkerRebalanceListener {
        @Override
        public void onAssigned(ExtendedAssignment assignment, int generation) {
            int delay = assignment.delay();
            scheduledRebalance = delay > 0 ? System.currentTimeMillis() + delay : Long.MAX_VALUE;
            PeerIO.emit("assignment",
                    "generation", generation,
                    "memberId", member.memberId(),
                    "leader", assignment.leader(),
                    "leaderUrl", assignment.leaderUrl(),
                    "isLeader", member.memberId().equals(assignment.leader()),
                    "error", (int) assignment.error(),
                    "offset", assignment.offset(),
                    "version", (int) assignment.version(),
                    "protocolVersion", (int) member.currentProtocolVersion(),
                    "connectors", sorted(assignment.connectors()),
                    "tasks", taskNames(assignment.tasks()),
                    "revokedConnectors", sorted(assignment.revokedConnectors()),
                    "revokedTasks", taskNames(assignment.revokedTasks()),
                    "delay", delay);
            pending = ExtendedAssignment.duplicate(assignment);
            member.wakeup();
        }

        @Override
        public void onRevoked(String leader, Collection<String> connectors, Collection<ConnectorTaskId> tasks) {
            PeerIO.emit("revoked", "leader", leader, "connectors", sorted(connectors), "tasks", taskNames(tasks));
        }

        @Override
        public void onPollTimeoutExpiry() {
            PeerIO.emit("poll_timeout");
        }
    }

    /**
     * Stands in for KafkaConfigBackingStore: a constant snapshot, so every worker agrees on the config
     * offset and the assignor sees connectors c0..c{N-1} with tasks c{i}-0..c{i}-{M-1}.
     */
    static final class FixedConfigStore implements ConfigBackingStore {
        private final ClusterConfigState snapshot;

        FixedConfigStore(int connectors, int tasksPerConnector) {
            Map<String, Integer> taskCounts = new HashMap<>();
            Map<String, Map<String, String>> connectorConfigs = new HashMap<>();
            Map<String, TargetState> targetStates = new HashMap<>();
            Map<ConnectorTaskId, Map<String, String>> taskConfigs = new HashMap<>();
            Map<String, AppliedConnectorConfig> applied = new HashMap<>();
            for (int i = 0; i < connectors; i++) {
                String name = "c" + i;
                Map<String, String> cfg = new HashMap<>();
                cfg.put("name", name);
                cfg.put("connector.class", "org.apache.kafka.connect.tools.MockSourceConnector");
                cfg.put("tasks.max", String.valueOf(tasksPerConnector));
                connectorConfigs.put(name, cfg);
                applied.put(name, new AppliedConnectorConfig(cfg));
                taskCounts.put(name, tasksPerConnector);
                targetStates.put(name, TargetState.STARTED);
                for (int t = 0; t < tasksPerConnector; t++) {
                    taskConfigs.put(new ConnectorTaskId(name, t), Collections.singletonMap("task", name + "-" + t));
                }
            }
            long offset = 1 + (long) connectors * (tasksPerConnector + 2);
            snapshot = new ClusterConfigState(offset, null, taskCounts, connectorConfigs, targetStates, taskConfigs,
                    Collections.emptyMap(), Collections.emptyMap(), applied, new HashSet<>(), new HashSet<>());
        }

        @Override
        public void start() {
        }

        @Override
        public void stop() {
        }

        @Override
        public ClusterConfigState snapshot() {
            return snapshot;
        }

        @Override
        public boolean contains(String connector) {
            return snapshot.contains(connector);
        }

        @Override
        public void putConnectorConfig(String connector, Map<String, String> properties, TargetState targetState) {
        }

        @Override
        public void removeConnectorConfig(String connector) {
        }

        @Override
        public void putTaskConfigs(String connector, List<Map<String, String>> configs) {
        }

        @Override
        public void removeTaskConfigs(String connector) {
        }

        @Override
        public void refresh(long timeout, TimeUnit unit) {
        }

        @Override
        public void putTargetState(String connector, TargetState state) {
        }

        @Override
        public void putSessionKey(SessionKey sessionKey) {
        }

        @Override
        public void putRestartRequest(RestartRequest restartRequest) {
        }

        @Override
        public void putTaskCountRecord(String connector, int taskCount) {
        }

        @Override
        public void putLoggerLevel(String namespace, String level) {
        }

        @Override
        public void setUpdateListener(UpdateListener listener) {
        }
    }
}
