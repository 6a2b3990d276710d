import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Shared plumbing for the test peers.
 *
 * Contract with the Python side (tests/support/java.py): stdout carries exactly one JSON object per
 * line and nothing else, so tests can parse events; everything else (library logging, stack traces)
 * goes to stderr. To guarantee that, the real stdout is captured here and System.out is pointed at
 * stderr before any Kafka class is loaded. A peer stops when stdin reaches EOF (the test died or
 * closed the pipe), when a "stop" line arrives, or when --max-seconds elapses.
 */
final class PeerIO {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    private static final CountDownLatch STOP = new CountDownLatch(1);
    private static final List<String> COMMANDS = new ArrayList<>();

    static {
        System.setOut(System.err);
    }

    private PeerIO() {
    }

    /** Call first in main(): forces the stdout capture above before any library class loads. */
    static void init() {
    }

    /**
     * --command-config FILE (the name Kafka's tools use): client settings from a properties file, put over
     * the peer's own (security.protocol, sasl.*, ssl.*: a peer on a SASL_SSL listener).
     */
    static Properties withCommandConfig(Properties p, Args a) {
        String file = a.get("command-config", null);
        if (file == null) {
            return p;
        }
        Properties extra = new Properties();
        try (java.io.Reader r = java.nio.file.Files.newBufferedReader(java.nio.file.Path.of(file), StandardCharsets.UTF_8)) {
            extra.load(r);
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("cannot read --command-config " + file + ": " + e.getMessage(), e);
        }
        p.putAll(extra);
        return p;
    }

    /** Emit one event line: {"event": name, ...fields}. */
    static void emit(String event, Object... keyValues) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", event);
        m.put("ts", System.currentTimeMillis());
        for (int i = 0; i + 1 < keyValues.length; i += 2) {
            m.put(String.valueOf(keyValues[i]), keyValues[i + 1]);
        }
        String line = toJson(m);
        synchronized (OUT) {
            OUT.println(line);
            OUT.flush();
        }
    }

    static void error(Throwable t) {
        emit("error", "error", t.getClass().getName(), "message", String.valueOf(t.getMessage()));
    }

    /**
     * Watch stdin on a daemon thread. "stop" or EOF trips the stop latch and runs onStop (typically a
     * consumer.wakeup()); any other line is queued for {@link #takeCommands()}, then onCommand runs.
     */
    static void watchStdin(Runnable onStop, Runnable onCommand) {
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    line = line.trim();
                    if (line.isEmpty()) {
                        continue;
                    }
                    if (line.equals("stop")) {
                        break;
                    }
                    synchronized (COMMANDS) {
                        COMMANDS.add(line);
                    }
                    if (onCommand != null) {
                        onCommand.run();
                    }
                }
            } catch (Exception e) {
                // stdin broken: same as EOF
            }
            requestStop(onStop);
        }, "peer-stdin");
        t.setDaemon(true);
        t.start();
    }

    static void requestStop(Runnable onStop) {
        STOP.countDown();
        if (onStop != null) {
            onStop.run();
        }
    }

    /** Commands received on stdin since the last call (other than "stop"). */
    static List<String> takeCommands() {
        synchronized (COMMANDS) {
            List<String> out = new ArrayList<>(COMMANDS);
            COMMANDS.clear();
            return out;
        }
    }

    static boolean stopRequested() {
        return STOP.getCount() == 0;
    }

    /** Sleep up to ms, returning early (true) if a stop was requested. */
    static boolean awaitStop(long ms) throws InterruptedException {
        return STOP.await(ms, TimeUnit.MILLISECONDS);
    }

    /** Arms a timer that requests a stop after maxSeconds (<= 0: never). */
    static void stopAfter(double maxSeconds, Runnable onStop) {
        if (maxSeconds <= 0) {
            return;
        }
        Thread t = new Thread(() -> {
            try {
                if (!STOP.await((long) (maxSeconds * 1000), TimeUnit.MILLISECONDS)) {
                    emit("max_seconds", "seconds", maxSeconds);
                    requestStop(onStop);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "peer-max-seconds");
        t.setDaemon(true);
        t.start();
    }

    /** "--key value" pairs and bare "--flag"s, plus positional arguments in order. */
    static final class Args {
        final Map<String, String> options = new HashMap<>();
        final List<String> positional = new ArrayList<>();

        Args(String[] argv) {
            for (int i = 0; i < argv.length; i++) {
                String a = argv[i];
                if (a.startsWith("--")) {
                    String key = a.substring(2);
                    int eq = key.indexOf('=');
                    if (eq >= 0) {
                        options.put(key.substring(0, eq), key.substring(eq + 1));
                    } else if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) {
                        options.put(key, argv[++i]);
                    } else {
                        options.put(key, "true");
                    }
                } else {
                    positional.add(a);
                }
            }
        }

        String get(String key, String dflt) {
            return options.getOrDefault(key, dflt);
        }

        String require(String key) {
            String v = options.get(key);
            if (v == null) {
                throw new IllegalArgumentException("missing required option --" + key);
            }
            return v;
        }

        int getInt(String key, int dflt) {
            return options.containsKey(key) ? Integer.parseInt(options.get(key)) : dflt;
        }

        double getDouble(String key, double dflt) {
            return options.containsKey(key) ? Double.parseDouble(options.get(key)) : dflt;
        }

        boolean flag(String key) {
            return Boolean.parseBoolean(options.getOrDefault(key, "false"));
        }
    }

    // ---- minimal JSON writer (no dependency beyond the JDK) ----

    static String toJson(Object o) {
        StringBuilder sb = new StringBuilder();
        write(sb, o);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object o) {
        if (o == null) {
            sb.append("null");
        } else if (o instanceof String) {
            quote(sb, (String) o);
        } else if (o instanceof Number || o instanceof Boolean) {
            sb.append(o);
        } else if (o instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                quote(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (o instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object x : (Collection<?>) o) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                write(sb, x);
            }
            sb.append(']');
        } else if (o instanceof Object[]) {
            write(sb, java.util.Arrays.asList((Object[]) o));
        } else {
            quote(sb, o.toString());
        }
    }

    private static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
