"""Packaging: package.xml, what an install puts where, pinned requirements, set-up scripts."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

import asap_ros

REPO = Path(__file__).resolve().parent.parent
ROS_EXEC_DEPENDS = {
    "rclpy", "std_msgs", "sensor_msgs", "geometry_msgs", "std_srvs", "diagnostic_msgs",
    "nav_msgs", "builtin_interfaces", "python3-numpy", "python3-yaml",
}
PACKAGE_SOURCES = ("setup.py", "setup.cfg", "package.xml", "resource", "asap_ros", "config", "policies", "launch")


def test_package_xml_is_an_ament_python_format3_package() -> None:
    root = ET.parse(REPO / "package.xml").getroot()
    assert root.tag == "package" and root.get("format") == "3"
    assert root.findtext("name") == "asap_ros"
    assert root.findtext("version") == asap_ros.__version__
    assert root.findtext("export/build_type") == "ament_python"
    assert ROS_EXEC_DEPENDS <= {e.text for e in root.findall("exec_depend")}
    assert (REPO / "resource" / "asap_ros").is_file()


def _shared_files(folder: str, pattern: str) -> set[str]:
    return {
        f"share/asap_ros/{p.relative_to(REPO).as_posix()}"
        for p in (REPO / folder).glob(pattern)
        if p.is_file() and not p.name.startswith(".")
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package built as a wheel from a copy of the sources (so the checkout stays clean)."""
    src = tmp_path_factory.mktemp("src")
    for name in PACKAGE_SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif (REPO / name).exists():
            shutil.copy2(REPO / name, src / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)],
        check=True, capture_output=True, timeout=300,
    )
    (built,) = out.glob("asap_ros-*.whl")
    return built


def test_wheel_installs_package_data_into_share(wheel: Path) -> None:
    data_prefix = f"asap_ros-{asap_ros.__version__}.data/data/"
    names = {n[len(data_prefix):] for n in zipfile.ZipFile(wheel).namelist() if n.startswith(data_prefix)}
    expected = (
        {"share/ament_index/resource_index/packages/asap_ros", "share/asap_ros/package.xml"}
        | _shared_files("config", "**/*")
        | _shared_files("policies", "*.yaml")
        | _shared_files("launch", "*.py")
    )
    assert any(n.startswith("share/asap_ros/config/") for n in expected)
    assert names == expected


def test_every_console_script_points_at_a_real_function(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (entry_points,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = archive.read(entry_points).decode()
    scripts = dict(re.findall(r"^(\S+) = (\S+)$", text.split("[console_scripts]")[1], re.M))
    assert scripts["asap-ros"] == "asap_ros.cli:main"
    for name, target in scripts.items():
        module_name, function = target.split(":")
        assert callable(getattr(importlib.import_module(module_name), function)), name


def test_installed_wheel_finds_its_data_under_prefix_share(wheel: Path, tmp_path: Path) -> None:
    """A plain (non-editable) install into a fresh venv: paths.share_dir() -> <prefix>/share/asap_ros."""
    prefix = tmp_path / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(prefix)], check=True, timeout=120)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(prefix / "bin" / "python"), "install", "--quiet", "--no-deps", str(wheel)],
        check=True, capture_output=True, timeout=300,
    )
    probe = "from asap_ros.paths import share_dir, config_file; print(share_dir()); print(config_file('g1_29dof.yaml').is_file())"
    done = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", probe],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AMENT_PREFIX_PATH")},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(prefix / "share" / "asap_ros"), "True"]
    assert (prefix / "bin" / "asap-ros").is_file()


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


@pytest.mark.parametrize("script", ["scripts/setup", "scripts/install-chromium", "scripts/test", "scripts/run-sim", ".ci/run"])
def test_scripts_are_executable_bash(script: str) -> None:
    path = REPO / script
    assert os.access(path, os.X_OK), f"{script} is not executable"
    subprocess.run(["bash", "-n", str(path)], check=True, timeout=30)


def test_setup_is_a_quiet_no_op_when_up_to_date() -> None:
    subprocess.run([str(REPO / "scripts" / "setup")], check=True, capture_output=True, timeout=600)
    again = subprocess.run([str(REPO / "scripts" / "setup")], capture_output=True, text=True, timeout=60)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


def test_console_script_runs_through_the_ros_bootstrap() -> None:
    """``.venv/bin/asap-ros`` re-executes once to set the ROS library path, then works."""
    done = subprocess.run(
        [str(Path(sys.prefix) / "bin" / "asap-ros"), "assets", "where"],
        capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if k != "_ROS_WHEELS_BOOTSTRAP_COMPLETE"},
    )
    assert done.returncode == 0, done.stderr
    assert "(* = in use)" in done.stdout
