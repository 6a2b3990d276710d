"""kcoord's table of Kafka API names (kcoord.protocol.api_names) and the metric labels made from it.

The table replaced kafka-python's ApiKey enum at run time (kafka-python is a test dependency only), so
the labels must not have moved: every API kafka-python names gets the same label as before, and
kcoord's own ApiKey names agree with Kafka's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kcoord.coordinator.ops.metrics import api_name
from kcoord.protocol.api_names import API_NAMES
from kcoord.protocol.messages import ApiKey

REPO = Path(__file__).resolve().parents[2]
KCOORD_SCHEMAS = REPO / "src" / "kcoord" / "protocol" / "schemas"
KAFKA_SPECS = REPO.parent / "shared" / "kafka-specs" / "client-messages"


def request_names(folder: Path) -> dict[int, str]:
    """API key -> name (minus "Request") of every ``*Request.json`` in ``folder``."""
    names = {}
    for path in sorted(folder.glob("*Request.json")):
        text = re.sub(r"^\s*//.*$", "", path.read_text(), flags=re.MULTILINE)
        spec = json.loads(text)
        if spec.get("type") == "request":
            names[spec["apiKey"]] = spec["name"].removesuffix("Request")
    return names


def test_the_table_agrees_with_the_schemas_kcoord_ships() -> None:
    shipped = request_names(KCOORD_SCHEMAS)
    assert shipped, KCOORD_SCHEMAS
    assert {key: API_NAMES[key] for key in shipped} == shipped


def test_the_table_is_kafkas_whole_list() -> None:
    if not KAFKA_SPECS.is_dir():
        pytest.skip(f"Kafka's message specs are not at {KAFKA_SPECS}")
    assert request_names(KAFKA_SPECS) == API_NAMES


def test_labels_of_kcoords_apis_are_its_apikey_names() -> None:
    for key in ApiKey:
        assert api_name(key.value) == key.name.lower()
    assert api_name(ApiKey.CONSUMER_GROUP_HEARTBEAT) == "consumer_group_heartbeat"


def test_labels_are_those_kafka_python_gave() -> None:
    """The label values from before: kafka-python's names, snake_cased by its old regex."""
    kafka_api_key = pytest.importorskip("kafka.protocol.api_key").ApiKey
    before = {k.value: re.sub(r"(?<!^)(?=[A-Z])", "_", k.name).lower() for k in kafka_api_key}
    before |= {k.value: k.name.lower() for k in ApiKey}
    assert {key: api_name(key) for key in before} == before
    assert api_name(19) == "create_topics" and api_name(0) == "produce"


def test_unknown_keys_keep_their_bounded_labels() -> None:
    unknown = max(API_NAMES) + 1
    assert api_name(unknown) == f"api_{unknown}"
    assert api_name(-5) == "unknown" and api_name(5000) == "unknown"
