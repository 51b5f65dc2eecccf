"""The package as installed: a wheel built and installed into a fresh prefix, console scripts, the scripts themselves (processes)."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import asap_ros

REPO = Path(__file__).resolve().parents[2]
PACKAGE_SOURCES = ("setup.py", "setup.cfg", "package.xml", "resource", "asap_ros", "config", "policies", "launch")


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
    probe = "from asap_ros.config.paths import share_dir, config_file; print(share_dir()); print(config_file('g1_29dof.yaml').is_file())"
    done = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", probe],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AMENT_PREFIX_PATH")},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(prefix / "share" / "asap_ros"), "True"]
    assert (prefix / "bin" / "asap-ros").is_file()


@pytest.mark.parametrize("script", ["scripts/setup", "scripts/install-chromium", "scripts/test", "scripts/lint",
                                    "scripts/run-sim", ".ci/run", "scripts/lock-for", "scripts/find-python",
                                    "scripts/check-colcon", "scripts/check-robot-wheels"])
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
