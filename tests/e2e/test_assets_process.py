"""Asset lookup in a fresh process with no assets anywhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from asap_ros.config import assets as asap_assets

REPO = Path(__file__).resolve().parents[2]


def test_missing_assets_error_names_every_place_searched(tmp_path: Path) -> None:
    """A checkout with no ../shared beside it and an empty cache: a subprocess, because the
    checkout location is fixed per process."""
    checkout = tmp_path / "checkout"
    shutil.copytree(REPO / "asap_ros", checkout / "asap_ros", ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / "config").mkdir()
    (checkout / "policies").mkdir()
    env = {k: v for k, v in os.environ.items() if k != asap_assets.ENV_VAR}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")

    done = subprocess.run(
        [sys.executable, "-m", "asap_ros.cli", "assets", "where"],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=60,
    )

    assert done.returncode == 2, done.stderr
    assert f"workplace copy: {tmp_path / 'shared' / 'asap-assets'}" in done.stderr
    assert f"user cache: {tmp_path / 'cache' / 'asap_ros' / 'assets'}" in done.stderr
    assert "ASAP_ASSETS" in done.stderr and "asap-ros assets fetch" in done.stderr
