"""Packaging: package.xml, what an install puts where, pinned requirements, set-up scripts."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import asap_ros

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


def _locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for number, line in enumerate((REPO / "requirements.lock").read_text().splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            match = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", line.strip())
            assert match, f"requirements.lock:{number}: not NAME==VERSION: {line!r}"
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
    assert not wrong, f"requirements.lock pins that differ from the environment (pin, installed): {wrong}"
    unlisted = {name: version for name, version in installed.items() if name not in locked}
    assert not unlisted, f"installed but missing from requirements.lock (add NAME==VERSION): {unlisted}"


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    (test_command,) = re.findall(r"^\| tests .*\| `([^`]+)` \|$", readme, re.M)
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    assert lines[:2] == ["#!/usr/bin/env bash", "set -euo pipefail"]
    assert lines[-1] == test_command
