import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupResult;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;

/**
 * The Java Admin client's group operations, one per invocation, printed as JSON events.
 *
 * Usage: AdminPeer --bootstrap B [--timeout-ms N] SUBCOMMAND ARGS...
 *   describe GROUP...                   -> {"event":"describe","groups":[{groupId,state,type,protocol...,members:[...]}]}
 *   remove-members GROUP INSTANCE_ID... -> {"event":"remove_members","group":G,"results":{id:"OK"|error}}
 *   list-offsets GROUP                  -> {"event":"offsets","group":G,"offsets":{"t-p":{offset,metadata,leaderEpoch}}}
 *   list-groups                         -> {"event":"groups","groups":[{groupId,type,protocol,state}]}
 *   delete-groups GROUP...              -> {"event":"delete_groups","results":{group:"OK"|error}}
 * A failure prints {"event":"error",...} and exits 1; per-item failures are reported inline.
 */
public final class AdminPeer {
    private AdminPeer() {
    }

    public static void main(String[] argv) {
        PeerIO.init();
        PeerIO.Args args = new PeerIO.Args(argv);
        int exit = 0;
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args.require("bootstrap"));
        int timeoutMs = args.getInt("timeout-ms", 20000);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, String.valueOf(timeoutMs));
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, String.valueOf(Math.min(timeoutMs, 15000)));
        try (Admin admin = Admin.create(p)) {
            List<String> pos = args.positional;
            if (pos.isEmpty()) {
                throw new IllegalArgumentException("missing subcommand");
            }
            List<String> rest = pos.subList(1, pos.size());
            switch (pos.get(0)) {
                case "describe":
                    describe(admin, rest, timeoutMs);
                    break;
                case "remove-members":
                    removeMembers(admin, rest.get(0), rest.subList(1, rest.size()), timeoutMs);
                    break;
                case "list-offsets":
                    listOffsets(admin, rest.get(0), timeoutMs);
                    break;
                case "list-groups":
                    listGroups(admin, timeoutMs);
                    break;
                case "delete-groups":
                    deleteGroups(admin, rest, timeoutMs);
                    break;
                default:
                    throw new IllegalArgumentException("unknown subcommand " + pos.get(0));
            }
        } catch (Throwable t) {
            Throwable cause = unwrap(t);
            PeerIO.error(cause);
            cause.printStackTrace();
            exit = 1;
        }
        System.exit(exit);
    }

    static void describe(Admin admin, List<String> groups, int timeoutMs) throws Exception {
        Map<String, ConsumerGroupDescription> all =
                admin.describeConsumerGroups(groups).all().get(timeoutMs, TimeUnit.MILLISECONDS);
        List<Object> out = new ArrayList<>();
        for (String g : groups) {
            out.add(describeJson(all.get(g)));
        }
        PeerIO.emit("describe", "groups", out);
    }

    static Map<String, Object> describeJson(ConsumerGroupDescription d) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("groupId", d.groupId());
        m.put("state", String.valueOf(d.groupState()));
        m.put("type", String.valueOf(d.type()));
        m.put("isSimple", d.isSimpleConsumerGroup());
        m.put("partitionAssignor", d.partitionAssignor());
        m.put("coordinator", nodeJson(d.coordinator()));
        List<Object> members = new ArrayList<>();
        for (MemberDescription md : d.members()) {
            Map<String, Object> mm = new LinkedHashMap<>();
            mm.put("memberId", md.consumerId());
            mm.put("groupInstanceId", md.groupInstanceId().orElse(null));
            mm.put("clientId", md.clientId());
            mm.put("host", md.host());
            mm.put("assignment", partitionNames(md.assignment().topicPartitions()));
            members.add(mm);
        }
        members.sort((a, b) -> String.valueOf(((Map<?, ?>) a).get("memberId"))
                .compareTo(String.valueOf(((Map<?, ?>) b).get("memberId"))));
        m.put("members", members);
        return m;
    }

    static Map<String, Object> nodeJson(Node n) {
        if (n == null) {
            return null;
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", n.id());
        m.put("host", n.host());
        m.put("port", n.port());
        return m;
    }

    static void removeMembers(Admin admin, String group, List<String> instanceIds, int timeoutMs) throws Exception {
        List<MemberToRemove> members = new ArrayList<>();
        for (String id : instanceIds) {
            members.add(new MemberToRemove(id));
        }
        RemoveMembersFromConsumerGroupResult result =
                admin.removeMembersFromConsumerGroup(group, new RemoveMembersFromConsumerGroupOptions(members));
        Map<String, Object> results = new TreeMap<>();
        for (MemberToRemove m : members) {
            results.put(m.groupInstanceId(), outcome(result.memberResult(m), timeoutMs));
        }
        PeerIO.emit("remove_members", "group", group, "results", results, "all", outcome(result.all(), timeoutMs));
    }

    static void listOffsets(Admin admin, String group, int timeoutMs) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group)
                .partitionsToOffsetAndMetadata().get(timeoutMs, TimeUnit.MILLISECONDS);
        Map<String, Object> out = new TreeMap<>();
        offsets.forEach((tp, om) -> {
            if (om == null) {
                out.put(tp.toString(), null);
                return;
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("offset", om.offset());
            m.put("metadata", om.metadata());
            m.put("leaderEpoch", om.leaderEpoch().orElse(null));
            out.put(tp.toString(), m);
        });
        PeerIO.emit("offsets", "group", group, "offsets", out);
    }

    static void listGroups(Admin admin, int timeoutMs) throws Exception {
        Collection<GroupListing> listings = admin.listGroups().all().get(timeoutMs, TimeUnit.MILLISECONDS);
        List<Object> out = new ArrayList<>();
        for (GroupListing g : listings) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("groupId", g.groupId());
            m.put("type", g.type().map(String::valueOf).orElse(null));
            m.put("protocol", g.protocol());
            m.put("state", g.groupState().map(String::valueOf).orElse(null));
            out.add(m);
        }
        PeerIO.emit("groups", "groups", out);
    }

    static void deleteGroups(Admin admin, List<String> groups, int timeoutMs) {
        Map<String, KafkaFuture<Void>> futures = admin.deleteConsumerGroups(groups).deletedGroups();
        Map<String, Object> results = new TreeMap<>();
        futures.forEach((g, f) -> results.put(g, outcome(f, timeoutMs)));
        PeerIO.emit("delete_groups", "results", results);
    }

    /** "OK", or the simple name of the error the future failed with (e.g. "FencedInstanceIdException"). */
    static String outcome(KafkaFuture<?> f, int timeoutMs) {
        try {
            f.get(timeoutMs, TimeUnit.MILLISECONDS);
            return "OK";
        } catch (Exception e) {
            return unwrap(e).getClass().getSimpleName();
        }
    }

    static Throwable unwrap(Throwable t) {
        while (t instanceof ExecutionException && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    static List<String> partitionNames(Collection<TopicPartition> parts) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : parts) {
            out.add(tp.toString());
        }
        out.sort(null);
        return out;
    }
}
