"""Packaging: package.xml, what an install puts where, pinned requirements, set-up scripts."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import asap_ros
from asap_ros.ros.compat import setup_distro

REPO = Path(__file__).resolve().parent.parent
ROS_EXEC_DEPENDS = {
    "rclpy", "std_msgs", "sensor_msgs", "geometry_msgs", "std_srvs", "diagnostic_msgs",
    "nav_msgs", "builtin_interfaces", "python3-numpy", "python3-yaml",
}


def test_package_xml_is_an_ament_python_format3_package() -> None:
    root = ET.parse(REPO / "package.xml").getroot()
    assert root.tag == "package" and root.get("format") == "3"
    assert root.findtext("name") == "asap_ros"
    assert root.findtext("version") == asap_ros.__version__
    assert root.findtext("export/build_type") == "ament_python"
    assert ROS_EXEC_DEPENDS <= {e.text for e in root.findall("exec_depend")}
    assert (REPO / "resource" / "asap_ros").is_file()


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def venv_distro() -> str:
    """The ROS 2 distribution this venv was set up for (scripts/setup writes it into the venv;
    ASAP_ROS_DISTRO, then Kilted, for a venv made otherwise)."""
    return setup_distro() or os.environ.get("ASAP_ROS_DISTRO", "kilted")


def _lock_file(version: str = f"{sys.version_info.major}.{sys.version_info.minor}", distro: str | None = None) -> Path:
    """The lock of an interpreter and distribution (scripts/lock-for), by default this venv's."""
    done = subprocess.run([str(REPO / "scripts" / "lock-for"), version, distro or venv_distro()],
                          capture_output=True, text=True, check=True)
    return REPO / done.stdout.strip()


def _locked(lock: Path | None = None) -> dict[str, str]:
    lock = lock or _lock_file()
    pins: dict[str, str] = {}
    for number, line in enumerate(lock.read_text().splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            match = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)(\s+#.*)?", line.strip())
            assert match, f"{lock.name}:{number}: not NAME==VERSION [# comment]: {line!r}"
            pins[_normalise(match[1])] = match[2]
    return pins


def _installed() -> dict[str, str]:
    """Installed distributions, minus asap_ros and the egg-info metadata that ros-* wheels
    ship inside themselves (rclpy, std_msgs, ...: not installable on their own)."""
    dists = list(importlib.metadata.distributions())
    embedded = {
        _normalise(str(f).split("-")[0])
        for d in dists
        for f in (d.files or [])
        if len(f.parts) == 2 and f.parts[0].endswith(".egg-info") and f.name == "PKG-INFO"
    }
    return {
        _normalise(d.metadata["Name"]): d.version
        for d in dists
        if _normalise(d.metadata["Name"]) not in embedded | {"asap-ros"}
    }


def test_requirements_lock_pins_exactly_the_installed_environment() -> None:
    locked, installed = _locked(), _installed()
    assert {"ros-rclpy", "onnxruntime", "mujoco", "unitree-sdk2py-dimos", "setuptools", "wheel"} <= set(locked)
    wrong = {name: (pin, installed.get(name)) for name, pin in locked.items() if installed.get(name) != pin}
    lock = _lock_file().name
    assert not wrong, f"{lock} pins that differ from the environment (pin, installed): {wrong}"
    unlisted = {name: version for name, version in installed.items() if name not in locked}
    assert not unlisted, f"installed but missing from {lock} (add NAME==VERSION): {unlisted}"


def test_each_interpreter_has_its_lock_and_they_differ_only_where_documented() -> None:
    assert [_lock_file(v, "kilted").name for v in ("3.10", "3.11", "3.12")] == [
        "requirements-py310.lock", "requirements.lock", "requirements-py312.lock"]
    assert _lock_file("3.12", "jazzy").name == "requirements-jazzy.lock"
    refused = subprocess.run([str(REPO / "scripts" / "lock-for"), "3.11", "jazzy"], capture_output=True, text=True)
    assert refused.returncode == 2 and "Jazzy's lock is for Python 3.12" in refused.stderr
    py311, py312, py310, jazzy = (_locked(REPO / f) for f in ("requirements.lock", "requirements-py312.lock",
                                                               "requirements-py310.lock", "requirements-jazzy.lock"))  # fmt: skip
    assert {k for k in py311.keys() | py312.keys() if py311.get(k) != py312.get(k)} == {"setuptools"}
    assert py310["mujoco"].startswith("3.") and py310["numpy"].startswith("2.2") and "mujoco-studio" not in py310
    assert {k for k in py311 if k.startswith("ros-")} == {k for k in py310 if k.startswith("ros-")}
    # Jazzy: the ROS wheels differ (rclpy 7, Fast DDS 2 as ros-fastrtps), nothing else
    differ = {k for k in py312.keys() | jazzy.keys() if py312.get(k) != jazzy.get(k)}
    assert differ and all(k.startswith("ros-") for k in differ), differ
    assert jazzy["ros-rclpy"] == "7.1.6" and py312["ros-rclpy"] == "9.1.2"
    assert {k for k in jazzy if k.startswith("ros-")} - {k for k in py312 if k.startswith("ros-")} == {
        "ros-fastrtps", "ros-fastrtps-cmake-module"}
    assert {k for k in py312 if k.startswith("ros-")} - {k for k in jazzy if k.startswith("ros-")} == {
        "ros-fastdds", "ros-rmw-security-common"}


def test_ci_runs_exactly_the_readme_test_commands() -> None:
    """.ci/run's steps: the README's test command itself (full suite, Kilted), the same on Jazzy
    (its README command), the fast tier on 3.10, the colcon build; nothing else runs tests."""
    readme = (REPO / "README.md").read_text()
    (test_command,) = re.findall(r"^\| tests \(.*\| `([^`]+)` \|$", readme, re.M)
    (jazzy_command,) = re.findall(r"^\| tests on ROS 2 Jazzy .*\| `([^`]+)` \|$", readme, re.M)
    (fast_command,) = re.findall(r"^\| fast: .*\| `([^`]+)` \|$", readme, re.M)
    assert fast_command == f'{test_command} -m "not e2e"'
    assert jazzy_command == f"ASAP_ROS_DISTRO=jazzy {test_command}"
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    assert lines[0] == "#!/usr/bin/env bash" and "set -euo pipefail" in lines
    steps = [re.fullmatch(r'step "([^"]+)" (.+)', line).groups() for line in lines if line.startswith("step ")]
    assert steps == [
        ("full suite, Kilted, Python 3.11", test_command),
        ("full suite, Jazzy, Python 3.12", f"env {jazzy_command}"),
        ("fast tier, Kilted, Python 3.10", f'env ASAP_PYTHON="$(scripts/find-python 3.10)" {fast_command}'),
        ("colcon build", "scripts/check-colcon"),
    ]
