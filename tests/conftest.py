"""Shared fixtures: the ASAP assets and an isolated DDS domain per test."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

from asap_ros.assets import asset_root

_domains = itertools.count()


@pytest.fixture(scope="session")
def assets() -> Path:
    """ASAP's published assets (``../shared/asap-assets`` here, or ``$ASAP_ASSETS``)."""
    return asset_root()


@pytest.fixture
def dds_domain() -> int:
    """A DDS domain id no other test process on this machine is using right now."""
    return 1 + (os.getpid() * 7 + next(_domains)) % 200
