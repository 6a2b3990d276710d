"""Read a compose file the way docker-compose does before it runs anything: YAML, then ``${VAR}``,
``${VAR:-default}``, ``${VAR-default}`` and ``$$`` substituted from an environment (empty by default,
so the documented defaults apply). The unit tests check the files as a user without those variables
gets them; the container tests pass their own ports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

_VAR = re.compile(r"\$(?:\$|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?-)(?P<default>[^}]*))?\})")


def interpolate(value: str, env: Mapping[str, str]) -> str:
    def sub(match: re.Match[str]) -> str:
        name = match.group("name")
        if name is None:
            return "$"
        got = env.get(name)
        if match.group("op") == ":-" and not got:
            return match.group("default")
        if match.group("op") == "-" and got is None:
            return match.group("default")
        return got or ""

    if re.search(r"\$(?!\$|\{[A-Za-z_])", value.replace("$$", "")):
        raise ValueError(f"unsupported substitution in {value!r}")
    return _VAR.sub(sub, value)


def _walk(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, list):
        return [_walk(n, env) for n in node]
    if isinstance(node, dict):
        return {k: _walk(v, env) for k, v in node.items()}
    return node


def load_compose(path: Path, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    loaded: dict[str, Any] = _walk(yaml.safe_load(path.read_text()), env or {})
    return loaded
