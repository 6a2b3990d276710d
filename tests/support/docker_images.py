"""Build every image the project's Docker files name, locally, cached by the content of their inputs.

    python3 -m tests.support.docker_images          # from the repository root (scripts/build_images.sh)

No image registry is reachable from our machines, so nothing is pulled:

1. ``kcoord-local/debian:bookworm``: a minimal Debian root file system from ``debootstrap`` (Debian's
   package mirror is reachable), made an image with ``docker import``.
2. Stand-ins under the exact tags the Dockerfile and compose files name, each built from
   deploy/standins/<name>/Dockerfile on that base: ``python:3.11-slim`` (Debian's python3 is 3.11),
   ``apache/kafka:4.0.0`` (the distribution in ../shared/kafka, with the official image's start
   scripts and KAFKA_* / CLUSTER_ID contract) and ``prom/prometheus:v2.55.1`` (Debian's prometheus).
3. ``kcoord:latest`` from ./Dockerfile, the image the compose files run.

Builds reach PyPI through a TLS-intercepting proxy, so the host's CA bundle goes into each stand-in's
build context as ``host-ca.crt`` while the context is streamed to the engine (a tar on stdin): it is
never written into the repository. The python stand-in adds it to the system trust store, so
``pip`` in ./Dockerfile's builds trusts the proxy without ./Dockerfile knowing about it.

Cached by content: each image carries the label ``org.kcoord.inputs``, a hash of everything that went
into it (its build context, and the hash of the image it is built from). An image whose label
matches is not rebuilt, so a second run costs seconds. Standard library only: scripts/test.sh runs
this before the test dependencies matter.
"""

from __future__ import annotations

import fnmatch
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STANDINS = REPO / "deploy" / "standins"
LABEL = "org.kcoord.inputs"
BASE_TAG = "kcoord-local/debian:bookworm"
KCOORD_TAG = "kcoord:latest"
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
DEBIAN_MIRROR = os.environ.get("KCOORD_DEBIAN_MIRROR", "http://deb.debian.org/debian")
# Packages the base needs beyond debootstrap's minbase: ca-certificates for the CA step of the stand-ins.
BASE_INCLUDE = ["ca-certificates"]
BASE_SOURCES = f"""\
deb {DEBIAN_MIRROR} bookworm main
deb {DEBIAN_MIRROR} bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
"""
# Bumped when the base recipe changes in a way the hash above does not see.
BASE_RECIPE = "minbase-v1"


def kafka_distribution() -> Path:
    """Apache Kafka 4.0.0 unpacked: ../shared/kafka beside the checkout (CI), or KCOORD_KAFKA_HOME."""
    env = os.environ.get("KCOORD_KAFKA_HOME")
    candidates = [Path(env)] if env else []
    candidates += [REPO.parent / "shared" / "kafka", Path("/work/shared/kafka")]
    for path in candidates:
        if (path / "bin" / "kafka-server-start.sh").is_file():
            return path
    raise BuildError(f"no Kafka distribution (looked in {', '.join(map(str, candidates))})")


@dataclass(frozen=True)
class Standin:
    tag: str
    folder: str  # deploy/standins/<folder>/
    with_kafka: bool = False  # the Kafka distribution goes into the context as kafka/


STANDIN_IMAGES = [
    Standin("python:3.11-slim", "python"),
    Standin("apache/kafka:4.0.0", "kafka", with_kafka=True),
    Standin("prom/prometheus:v2.55.1", "prometheus"),
]
ALL_TAGS = [BASE_TAG, *(s.tag for s in STANDIN_IMAGES), KCOORD_TAG]


class BuildError(Exception):
    """An image could not be built; the message says which and why."""


# -- the docker CLI -----------------------------------------------------------------------------------
def docker_cli() -> str:
    """Debian's client when installed: it matches the daemon scripts/docker_engine.sh starts.

    A newer client first in PATH (a 28.x /usr/local/bin/docker here) negotiates down too, but Debian's
    has no BuildKit-only defaults to trip over.
    """
    if os.access("/usr/bin/docker", os.X_OK):
        return "/usr/bin/docker"
    found = shutil.which("docker")
    if not found:
        raise BuildError("no docker CLI")
    return found


def docker(*args: str, input: bytes | None = None, check: bool = True, timeout: float = 1800) -> str:
    proc = subprocess.run([docker_cli(), *args], input=input, capture_output=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise BuildError(f"docker {' '.join(args[:3])}: {proc.stderr.decode(errors='replace')[-3000:]}")
    return proc.stdout.decode(errors="replace")


def image_inputs(tag: str) -> str | None:
    """The ``org.kcoord.inputs`` label of a local image, '' without it, None when there is no image."""
    proc = subprocess.run(
        [docker_cli(), "image", "inspect", "--format", f'{{{{ index .Config.Labels "{LABEL}" }}}}', tag],
        capture_output=True,
        timeout=30,
    )
    if proc.returncode != 0:
        return None
    out = proc.stdout.decode().strip()
    return "" if out == "<no value>" else out


def missing_images(tags: Iterable[str]) -> list[str]:
    """Tags with no local image: what a test names in its skip reason."""
    return [t for t in tags if image_inputs(t) is None]


# -- .dockerignore ------------------------------------------------------------------------------------
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """A .dockerignore pattern as a regex over '/'-separated relative paths (Go filepath.Match + '**')."""
    out = ""
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**", i):
            out += ".*"
            i += 2
            if pattern.startswith("/", i):  # '**/' also matches no directory at all
                out = out[:-2] + "(?:.*/)?"
                i += 1
            continue
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            end = pattern.find("]", i)
            if end < 0:
                out += re.escape(c)
            else:
                out += fnmatch.translate(pattern[i : end + 1])[4:-3]  # fnmatch's class syntax
                i = end
        else:
            out += re.escape(c)
        i += 1
    return re.compile(out + r"(?:/.*)?\Z")  # a matched directory excludes everything below it


def dockerignore_rules(root: Path) -> list[tuple[bool, re.Pattern[str]]]:
    """(exclude?, regex) per line of root/.dockerignore, in order: the last matching line decides."""
    path = root / ".dockerignore"
    rules: list[tuple[bool, re.Pattern[str]]] = []
    if not path.exists():
        return rules
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = os.path.normpath(line[1:] if negate else line).lstrip("/")
        rules.append((not negate, _pattern_regex(pattern)))
    return rules


def in_build_context(rel: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    excluded = False
    for exclude, regex in rules:
        if regex.match(rel):
            excluded = exclude
    return not excluded


def context_files(root: Path) -> list[str]:
    """Relative paths of the files ``docker build root`` sends, per root/.dockerignore."""
    rules = dockerignore_rules(root)
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        # Prune directories excluded outright unless a later '!' rule could bring something back.
        if not any(not exclude for exclude, _ in rules):
            dirnames[:] = [d for d in dirnames if in_build_context(rel_dir + d, rules)]
        dirnames.sort()
        for name in sorted(filenames):
            rel = rel_dir + name
            if in_build_context(rel, rules):
                files.append(rel)
    return files


# -- hashing and tar contexts -------------------------------------------------------------------------
def _hash_files(h: hashlib._Hash, entries: Iterable[tuple[str, Path]]) -> None:
    for name, path in entries:
        h.update(name.encode() + b"\0")
        h.update(oct(path.stat().st_mode & 0o111).encode() + b"\0")  # executable bits matter
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")


def _tree(prefix: str, root: Path) -> Iterator[tuple[str, Path]]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            yield f"{prefix}{path.relative_to(root).as_posix()}", path


def standin_context(standin: Standin) -> list[tuple[str, Path]]:
    if not HOST_CA.is_file():
        raise BuildError(f"no CA bundle at {HOST_CA}: builds could not trust the network's TLS proxy")
    entries = list(_tree("", STANDINS / standin.folder))
    entries.append(("host-ca.crt", HOST_CA))
    if standin.with_kafka:
        entries += list(_tree("kafka/", kafka_distribution()))
    return entries


def tar_context(entries: list[tuple[str, Path]]) -> bytes:
    buf = io.BytesIO()
    # GNU format: the docker CLI recognises a PAX-headed stream on stdin as a Dockerfile, not a context.
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, path in entries:
            info = tar.gettarinfo(str(path), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if info.isfile():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return buf.getvalue()


# -- the builds ---------------------------------------------------------------------------------------
def _say(message: str) -> None:
    print(f"build_images: {message}", flush=True)


def build_base() -> str:
    h = hashlib.sha256(f"{BASE_RECIPE}\n{DEBIAN_MIRROR}\n{BASE_INCLUDE}\n{BASE_SOURCES}".encode())
    digest = h.hexdigest()[:20]
    if image_inputs(BASE_TAG) == digest:
        _say(f"{BASE_TAG}: cached ({digest})")
        return digest
    if shutil.which("debootstrap") is None:
        raise BuildError("no debootstrap (scripts/docker_engine.sh installs it)")
    if os.geteuid() != 0:
        raise BuildError("debootstrap needs root")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kcoord-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        proc = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(BASE_INCLUDE)}",
                "bookworm",
                str(rootfs),
                DEBIAN_MIRROR,
            ],
            capture_output=True,
            timeout=1200,
        )
        if proc.returncode != 0:
            raise BuildError(f"debootstrap failed: {proc.stdout.decode(errors='replace')[-2000:]}")
        (rootfs / "etc/apt/sources.list").write_text(BASE_SOURCES)
        # Like Debian's official images: no apt caches or man pages kept in layers.
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
        for lists in (rootfs / "var/lib/apt/lists").glob("*_*"):
            lists.unlink()
        tar = subprocess.run(
            ["tar", "-C", str(rootfs), "--numeric-owner", "-c", "."], capture_output=True, check=True
        ).stdout
        docker(
            "import",
            "--change",
            f"LABEL {LABEL}={digest}",
            "--change",
            'CMD ["bash"]',
            "--change",
            "ENV LANG=C.UTF-8",
            "-",
            BASE_TAG,
            input=tar,
        )
    _say(f"{BASE_TAG}: built in {time.monotonic() - started:.0f}s ({digest})")
    return digest


def build_from_tar(tag: str, entries: list[tuple[str, Path]], parent_digest: str) -> str:
    h = hashlib.sha256(parent_digest.encode() + b"\0")
    _hash_files(h, entries)
    digest = h.hexdigest()[:20]
    if image_inputs(tag) == digest:
        _say(f"{tag}: cached ({digest})")
        return digest
    started = time.monotonic()
    docker("build", "--quiet", "--label", f"{LABEL}={digest}", "-t", tag, "-", input=tar_context(entries))
    _say(f"{tag}: built in {time.monotonic() - started:.0f}s ({digest})")
    return digest


def build_kcoord(python_digest: str, tag: str = KCOORD_TAG) -> str:
    """./Dockerfile with the repository as its context (per .dockerignore), as `docker build .` does."""
    h = hashlib.sha256(python_digest.encode() + b"\0")
    _hash_files(h, ((rel, REPO / rel) for rel in context_files(REPO)))
    digest = h.hexdigest()[:20]
    if image_inputs(tag) == digest:
        _say(f"{tag}: cached ({digest})")
        return digest
    started = time.monotonic()
    docker("build", "--quiet", "--label", f"{LABEL}={digest}", "-t", tag, str(REPO))
    _say(f"{tag}: built in {time.monotonic() - started:.0f}s ({digest})")
    return digest


def build_all() -> None:
    """Every image; one that cannot be built (no Kafka distribution, say) does not stop the others,
    so the tests that need only those still run. Raises BuildError naming every failure."""
    base = build_base()
    digests: dict[str, str] = {}
    failures: list[str] = []
    for standin in STANDIN_IMAGES:
        try:
            digests[standin.tag] = build_from_tar(standin.tag, standin_context(standin), base)
        except (BuildError, subprocess.SubprocessError, OSError) as exc:
            failures.append(f"{standin.tag}: {exc}")
    if "python:3.11-slim" in digests:
        try:
            build_kcoord(digests["python:3.11-slim"])
        except (BuildError, subprocess.SubprocessError, OSError) as exc:
            failures.append(f"{KCOORD_TAG}: {exc}")
    else:
        failures.append(f"{KCOORD_TAG}: its base python:3.11-slim did not build")
    if failures:
        raise BuildError("; ".join(failures))


# Why the last build failed, for the tests' skip reasons (tests/support/containers.py reads it).
REASON_FILE = REPO / ".cache" / "build-images.reason"


def main() -> int:
    started = time.monotonic()
    REASON_FILE.parent.mkdir(parents=True, exist_ok=True)
    REASON_FILE.unlink(missing_ok=True)
    try:
        build_all()
    except (BuildError, subprocess.SubprocessError, OSError) as exc:
        print(f"build_images: {exc}", file=sys.stderr)
        REASON_FILE.write_text(
            str(exc).strip().splitlines()[0][:500] + "\n" if str(exc).strip() else "failed\n"
        )
        return 1
    _say(f"all images ready in {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
