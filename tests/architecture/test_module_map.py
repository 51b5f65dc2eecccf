"""docs/design.md's module map and README's layout table match the tree."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_design_module_map_lists_every_module_once() -> None:
    text = (REPO / "docs" / "design.md").read_text()
    section = text[text.index("## Module map"):text.index("## Conventions")]
    listed = Counter(re.findall(r"^\| `(asap_ros/[\w/]+\.py)` \|", section, re.M))
    modules = {p.relative_to(REPO).as_posix() for p in (REPO / "asap_ros").rglob("*.py")
               if p.name != "__init__.py" or p.parent == REPO / "asap_ros"}  # fmt: skip
    assert sorted(m for m, n in listed.items() if n > 1) == [], "listed twice"
    assert sorted(modules - set(listed)) == [], "missing from docs/design.md"
    assert sorted(set(listed) - modules) == [], "listed but not in the tree"


def test_readme_layout_table_names_every_package_folder() -> None:
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Layout"):]
    section = section[: section.index("\n## ", 1)]
    listed = set(re.findall(r"^\| `(asap_ros/\w+/)` \|", section, re.M))
    folders = {f"asap_ros/{p.name}/" for p in (REPO / "asap_ros").iterdir() if (p / "__init__.py").is_file()}
    assert listed == folders
