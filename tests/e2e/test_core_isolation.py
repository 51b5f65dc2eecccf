"""``asap_ros.core`` (and the raw g1 path) import in a fresh interpreter where the heavy
packages cannot be imported at all: a meta-path finder raises for each of them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

BLOCKED = ("onnxruntime", "cyclonedds", "unitree_sdk2py", "mujoco", "rclpy", "yaml", "ament_index_python")

PROBE = """
import importlib, importlib.abc, json, pkgutil, sys

BLOCKED = set(sys.argv[1].split(","))
AT_START = set(sys.modules)  # the interpreter's own start-up (site, .pth hooks)

class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked in this test")
        return None

sys.meta_path.insert(0, Blocker())
loaded = []
for target in sys.argv[2].split(","):
    package = importlib.import_module(target)
    names = [target] if not hasattr(package, "__path__") else [
        target, *(m.name for m in pkgutil.walk_packages(package.__path__, target + "."))]
    for name in names:
        importlib.import_module(name)
        loaded.append(name)
outside = sorted({m.split(".")[0] for m in set(sys.modules) - AT_START} - set(sys.stdlib_module_names) - {"asap_ros", "numpy"})
print(json.dumps({"loaded": loaded, "outside": outside}))
"""


def probe(*targets: str) -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE, ",".join(BLOCKED), ",".join(targets)],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_blocker_really_blocks() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE, ",".join(BLOCKED), "asap_ros.runtime.actor"],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode != 0 and "onnxruntime is blocked in this test" in result.stderr


def test_core_needs_numpy_and_the_standard_library_only() -> None:
    info = probe("asap_ros.core")
    assert "asap_ros.core.controller" in info["loaded"] and "asap_ros.core.quaternion" in info["loaded"]
    assert info["outside"] == [], info["outside"]


@pytest.mark.parametrize("module", ["asap_ros.g1.layout", "asap_ros.g1.crc", "asap_ros.g1.codec"])
def test_raw_g1_path_needs_no_sdk(module: str) -> None:
    assert probe(module)["outside"] == []
