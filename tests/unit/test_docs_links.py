"""Every relative link in the README, CONTRIBUTING, CHANGELOG and docs/ names a file that exists.

The manual was split from one README into docs/ by subject; a link that names a moved or renamed
file would otherwise rot silently. Only relative links to files are checked (web links and
in-page anchors are not): what a reader can follow inside the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [
        REPO / "README.md",
        REPO / "CONTRIBUTING.md",
        REPO / "CHANGELOG.md",
        REPO / "bench" / "README.md",
        REPO / "bench" / "RESULTS.md",
        *(REPO / "docs").glob("*.md"),
    ]
)
# [text](target) and ![alt](target); a target ends at whitespace or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def relative_targets(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold commands, not links
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


@pytest.mark.parametrize("page", [p for p in PAGES if p.exists()], ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page: Path) -> None:
    missing = [t for t in relative_targets(page) if not (page.parent / t.split("#")[0]).exists()]
    assert not missing, f"{page.relative_to(REPO)} links to files that do not exist: {missing}"


def test_the_checker_sees_links() -> None:
    """The README links into docs/; if the pattern stopped matching, every page would pass."""
    assert "docs/architecture.md" in relative_targets(REPO / "README.md")
