"""The package's dependency direction, read from the source with ``ast`` (every import, also
the ones inside functions):

    core  <-  g1, config  <-  runtime, tracking, mocap  <-  sim, recording, bench  <-  ros
          <-  export, doctor  <-  view  <-  commands, cli  <-  testing

A module may import its own folder and any folder on a lower layer, never a folder on its own
layer or above. ``asap_ros/__init__.py`` (the version) is importable from anywhere. The core
imports numpy and the standard library only; the raw g1 path no SDK and no DDS. (The same rules
with the heavy packages really blocked: ``tests/e2e/test_core_isolation.py``.)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "asap_ros"

LAYERS: dict[str, int] = {
    "core": 0,
    "g1": 1, "config": 1,
    "runtime": 2, "tracking": 2, "mocap": 2,
    "sim": 3, "recording": 3, "bench": 3,
    "ros": 4,
    "export": 5, "doctor": 5,
    "view": 6,
    "commands": 7, "cli": 7,
    "testing": 8,
}  # fmt: skip
"""Layer of each folder (and of ``cli.py``): imports point to lower layers only."""

CORE_EXTERNAL = {"numpy"}
RAW_G1 = ("layout", "crc", "codec")
"""The g1 modules on the control path: no ``unitree_sdk2py``, no ``cyclonedds``."""


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if ".venv" not in p.parts)


def folder_of(path: Path) -> str | None:
    """The folder (layer key) of a package file; ``None`` for ``asap_ros/__init__.py``."""
    relative = path.relative_to(PACKAGE)
    if len(relative.parts) == 1:
        return None if relative.name == "__init__.py" else relative.stem
    return relative.parts[0]


def imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in a file, absolute names."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: relative import"
            if node.module == "asap_ros":
                found += [(node.lineno, f"asap_ros.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module or ""))
    return found


def internal_folder(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] != "__version__" else None


def test_every_folder_has_a_layer() -> None:
    folders = {folder_of(p) for p in modules()} - {None}
    assert folders == set(LAYERS), f"classify {sorted(folders - set(LAYERS))} in LAYERS (and docs/design.md)"


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for path in modules():
        source = folder_of(path)
        for line, module in imports(path):
            if not module.startswith("asap_ros"):
                continue
            target = internal_folder(module)
            if source is None or target is None or target == source:
                continue
            if LAYERS[target] >= LAYERS[source]:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {source} (layer {LAYERS[source]}) "
                             f"imports {module} ({target}, layer {LAYERS[target]})")
    assert not wrong, "imports against the dependency direction:\n" + "\n".join(wrong)


def test_core_imports_numpy_and_the_standard_library_only() -> None:
    wrong = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {module}"
        for path in sorted((PACKAGE / "core").rglob("*.py"))
        for line, module in imports(path)
        if not module.startswith("asap_ros.core")
        and module.split(".")[0] not in CORE_EXTERNAL | set(sys.stdlib_module_names)
    ]
    assert not wrong, "asap_ros.core must import numpy and the standard library only:\n" + "\n".join(wrong)


@pytest.mark.parametrize("name", RAW_G1)
def test_raw_g1_path_needs_no_sdk_and_no_dds(name: str) -> None:
    path = PACKAGE / "g1" / f"{name}.py"
    heavy = [(line, m) for line, m in imports(path) if m.split(".")[0] in ("unitree_sdk2py", "cyclonedds")]
    assert not heavy, f"{path}: {heavy}"


def test_the_checker_sees_a_violation(tmp_path: Path) -> None:
    """The rules above can fail: a core module importing the runtime, found inside a function."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from asap_ros.runtime.actor import OnnxActor\n    import onnxruntime\n")
    assert imports(bad) == [(2, "asap_ros.runtime.actor"), (3, "onnxruntime")]
    assert LAYERS[internal_folder("asap_ros.runtime.actor")] > LAYERS["core"]
