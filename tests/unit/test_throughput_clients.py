"""The relay benchmarks' client selection and their reading of the Java throughput peer's output
(support/throughput_clients.py)."""

from __future__ import annotations

import pytest

from support.throughput_clients import CLIENTS, peer_event, select_clients


def test_all_clients_by_default() -> None:
    assert select_clients(None, None) == (list(CLIENTS), [])


def test_java_is_skipped_with_its_reason() -> None:
    clients, notes = select_clients(None, "java/javac not installed")
    assert clients == ["librdkafka"]
    assert notes == ["java client skipped: java/javac not installed"]


def test_named_clients_keep_their_order_once_each() -> None:
    assert select_clients(" java ,librdkafka,java", None) == (["java", "librdkafka"], [])
    assert select_clients("librdkafka", "no jdk") == (["librdkafka"], [])


@pytest.mark.parametrize("spec", ["kafka-python", "librdkafka,jvm", ","])
def test_unknown_or_empty_clients_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="--clients"):
        select_clients(spec, None)


def test_peer_event_is_the_last_matching_json_line() -> None:
    stdout = (
        '{"event":"error","error":"x"}\n'
        "not json\n"
        '{"event":"produced","records":10,"seconds":1.5,"failed":0}\n'
        '{"event":"produced","records":10,"seconds":2.5,"failed":0}\n'
    )
    assert peer_event(stdout, "produced")["seconds"] == 2.5


def test_peer_event_missing_says_what_was_printed() -> None:
    with pytest.raises(ValueError, match="no 'consumed' event"):
        peer_event('{"event":"error","error":"boom"}\n', "consumed")
