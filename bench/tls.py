"""What TLS costs, side by side in one run: relay throughput and kcoord's CPU per OffsetCommit.

One Apache Kafka 4.0 node (support.kafka_broker) with a PLAINTEXT and an SSL listener
(certificates made with openssl, support/certs.py), and two kcoord processes pinned to CPU 0:
``plain`` (plaintext listeners, plaintext to Kafka) and ``tls`` (TLS listeners, TLS to Kafka's SSL
listener). Kafka and the clients share CPU 1.

- ``throughput``: confluent-kafka produces ``--records`` records of ``--size`` bytes (acks=1,
  one partition) and a consumer reads them back; MB/s of payload, four targets back to back per
  round: Kafka's PLAINTEXT listener, Kafka's SSL listener, kcoord plain, kcoord tls.
- ``commits``: ``--connections`` connections of kcoord's own client (TLS for the tls kcoord), each
  keeping ``--depth`` OffsetCommit v8 requests (simple commits, generation -1, one partition) in
  flight for ``--seconds``; kcoord's CPU (/proc/PID/stat) over the window divided by the commits
  answered is the CPU per commit. Commits are durable (storage=kafka, on each kcoord's own
  internal topic; the tls kcoord appends over TLS).

    .venv/bin/python -m bench.tls --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kcoord.client import ClientTls, Connection, UpstreamSecurity, client_context
from kcoord.protocol import messages as m
from support import procs
from support.certs import Pki, make_pki
from support.kafka_broker import KafkaBroker
from support.kcoord_process import SERVING_LINE, serve_command
from support.loadgen.procstat import cpu_seconds
from support.ports import free_port_block
from support.workload import unique

OFFSET_COMMIT_VERSION = 8


def start_kcoord(name: str, upstream: str, cpu: int, args: list[str]) -> tuple[procs.Child, str]:
    listen = f"127.0.0.1:{free_port_block(4)}"
    child = procs.Child(name, serve_command(listen, upstream, args), cpu).start()
    child.wait_for_log(SERVING_LINE, 90)
    return child, listen


def librdkafka_tls(pki: Pki) -> dict[str, str]:
    return {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}


# -- throughput -------------------------------------------------------------------------------------------
def produce_consume(client: dict[str, str], records: int, size: int) -> tuple[float, float]:
    """(produce MB/s, consume MB/s) of ``records`` records of ``size`` bytes on a new one-partition topic."""
    topic = unique("tls-bench")
    admin = AdminClient(client)  # kept: the futures fail once the client is collected
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(60)
    producer = Producer({**client, "acks": "1", "linger.ms": 5, "batch.size": 1 << 20})
    value = b"x" * size
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    produced = time.perf_counter() - started
    consumer = Consumer({**client, "group.id": unique("tls-bench"), "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    started = time.perf_counter()
    deadline = started + 120
    while got < records and time.perf_counter() < deadline:
        for message in consumer.consume(10_000, 0.5):
            if not message.error():
                got += 1
    consumed = time.perf_counter() - started
    consumer.close()
    if got < records:
        raise RuntimeError(f"consumed {got} of {records}")
    mb = records * size / 1e6
    return mb / produced, mb / consumed


# -- commits ----------------------------------------------------------------------------------------------
async def commit_load(
    address: str, context: ssl.SSLContext | None, topic: str, connections: int, depth: int, seconds: float
) -> int:
    """Commits answered in ``seconds`` by a closed loop of ``connections`` x ``depth`` OffsetCommits."""
    host, port = address.rsplit(":", 1)
    conns = [
        await Connection.open((host, int(port)), security=UpstreamSecurity(ssl=context))
        for _ in range(connections)
    ]
    for conn in conns:
        await conn.negotiate()
    done = 0
    running = True
    R = m.OffsetCommitRequest

    def request(i: int, offset: int) -> Any:
        partition = R.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset)
        return R(
            group_id=f"bench-tls-{i}",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[R.OffsetCommitRequestTopic(name=topic, partitions=[partition])],
        )

    def send(i: int, conn: Connection, offset: int) -> None:
        def answered(response: Any) -> None:
            nonlocal done
            if response is None:
                return
            error = response.topics[0].partitions[0].error_code
            if error:
                raise RuntimeError(f"OffsetCommit error {error}")
            if running:
                done += 1
                send(i, conn, offset + 1)

        conn.call_cb(request(i, offset), OFFSET_COMMIT_VERSION, answered)

    for i, conn in enumerate(conns):
        for d in range(depth):
            send(i, conn, d)
    await asyncio.sleep(seconds)
    running = False
    counted = done
    await asyncio.sleep(0.5)
    for conn in conns:
        conn.close()
    return counted


def measure_commits(
    child: procs.Child, address: str, context: ssl.SSLContext | None, topic: str, args: argparse.Namespace
) -> tuple[float, float]:
    """(commits/s, kcoord µs of CPU per commit)."""
    asyncio.run(commit_load(address, context, topic, args.connections, args.depth, 2.0))  # warm up
    cpu_before, started = cpu_seconds(child.pid), time.perf_counter()
    count = asyncio.run(commit_load(address, context, topic, args.connections, args.depth, args.seconds))
    cpu, wall = cpu_seconds(child.pid) - cpu_before, time.perf_counter() - started
    return count / wall, cpu / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="kcoord-bench-tls-"))
    pki = make_pki(folder / "pki")
    with KafkaBroker(folder / "kafka", tls=pki) as kafka:
        tls_args = [
            "--listener-security-protocol", "SSL", "--ssl-keystore-location", str(pki.server),
            "--upstream-security-protocol", "SSL", "--upstream-ssl-truststore-location", str(pki.ca),
        ]  # fmt: skip
        common = ["--shards", "4", "--events-topic", ""]
        plain, plain_at = start_kcoord(
            "kcoord-plain", kafka.bootstrap, 0, [*common, "--internal-topic", unique("__kb_plain")]
        )
        tls, tls_at = start_kcoord("kcoord-tls", kafka.ssl_bootstrap, 0, [*common, *tls_args, "--internal-topic", unique("__kb_tls")])  # fmt: skip
        try:
            client_tls = librdkafka_tls(pki)
            targets = {
                "kafka PLAINTEXT": {"bootstrap.servers": kafka.bootstrap},
                "kafka SSL": {"bootstrap.servers": kafka.ssl_bootstrap, **client_tls},
                "kcoord plain": {"bootstrap.servers": plain_at},
                "kcoord tls": {"bootstrap.servers": tls_at, **client_tls},
            }
            topic = unique("tls-commits")
            admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
            admin.create_topics([NewTopic(topic, 1)])[topic].result(60)
            context = client_context(ClientTls(truststore=str(pki.ca)))
            rates: dict[str, list[tuple[float, float]]] = {name: [] for name in targets}
            commits: dict[str, list[tuple[float, float]]] = {"kcoord plain": [], "kcoord tls": []}
            for r in range(args.rounds):
                for name, client in targets.items():
                    rates[name].append(produce_consume(client, args.records, args.size))
                    print(f"round {r + 1} {name:16} produce {rates[name][-1][0]:7.1f} MB/s  consume {rates[name][-1][1]:7.1f} MB/s", flush=True)  # fmt: skip
                commits["kcoord plain"].append(measure_commits(plain, plain_at, None, topic, args))
                commits["kcoord tls"].append(measure_commits(tls, tls_at, context, topic, args))
                for name in commits:
                    print(f"round {r + 1} {name:16} {commits[name][-1][0]:8.0f} commits/s  {commits[name][-1][1]:6.1f} µs CPU/commit", flush=True)  # fmt: skip
            print("\nmedians over rounds")
            for name, values in rates.items():
                print(f"{name:16} produce {statistics.median(v[0] for v in values):7.1f} MB/s  consume {statistics.median(v[1] for v in values):7.1f} MB/s")  # fmt: skip
            for name, values in commits.items():
                print(f"{name:16} {statistics.median(v[0] for v in values):8.0f} commits/s  {statistics.median(v[1] for v in values):6.1f} µs CPU/commit")  # fmt: skip
        finally:
            plain.stop()
            tls.stop()


if __name__ == "__main__":
    main()
