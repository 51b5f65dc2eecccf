"""Shared fixtures: the ASAP assets and an isolated DDS domain per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from asap_ros.assets import asset_root

@pytest.fixture(scope="session")
def assets() -> Path:
    """ASAP's published assets (``../shared/asap-assets`` here, or ``$ASAP_ASSETS``)."""
    return asset_root()


@pytest.fixture(scope="session")
def dds_domain() -> int:
    """This test process's own DDS domain id (1..200), so concurrent runs never cross-talk.

    unitree_sdk2py's channel factory is process-global: one domain per process. Tests that
    need a second domain start a subprocess.
    """
    return 1 + os.getpid() % 200
