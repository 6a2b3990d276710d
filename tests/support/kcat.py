"""Locate kcat (apt package ``kcat``), the librdkafka command-line client.

kcat is an optional peer: tests that use it skip when ``kcat_path()`` is None. Debian 12's kcat
1.7.1 embeds librdkafka 2.0.2, which cannot parse tansu's ApiVersions v3 response (see
docs/tansu.md), so use it against kcoord, not against tansu directly.
"""

from __future__ import annotations

import re
import shutil
import subprocess

SKIP_REASON = "kcat not installed (apt-get install -y kcat)"


def kcat_path() -> str | None:
    """Absolute path of kcat (or the older name kafkacat), or None when absent."""
    return shutil.which("kcat") or shutil.which("kafkacat")


def librdkafka_version() -> tuple[int, ...] | None:
    """The librdkafka version kcat was built with, e.g. (2, 0, 2); None if kcat is absent or silent."""
    path = kcat_path()
    if path is None:
        return None
    out = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=10)
    match = re.search(r"librdkafka (\d+(?:\.\d+)+)", out.stdout + out.stderr)
    return tuple(int(x) for x in match.group(1).split(".")) if match else None
