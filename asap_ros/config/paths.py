"""Where the package's own data (``config/``, ``policies/``, ``launch/``) lives.

In a source checkout or editable install it is the repository root; installed by colcon
it is the package's ament share directory; installed as a wheel, ``<prefix>/share/asap_ros``.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

PACKAGE = "asap_ros"


@lru_cache(maxsize=1)
def share_dir() -> Path:
    """Directory holding ``config/``, ``policies/`` and ``launch/``."""
    source_root = Path(__file__).resolve().parents[2]
    candidates = [source_root, Path(sys.prefix) / "share" / PACKAGE]
    try:
        from ament_index_python.packages import get_package_share_directory

        candidates.insert(1, Path(get_package_share_directory(PACKAGE)))
    except Exception:  # not in an ament workspace: the other candidates apply
        pass
    for candidate in candidates:
        if (candidate / "config").is_dir() and (candidate / "policies").is_dir():
            return candidate
    raise FileNotFoundError(
        f"asap_ros data (config/, policies/) not found in any of: {', '.join(map(str, candidates))}"
    )


def config_file(name: str) -> Path:
    """Path of a file in the package's ``config/`` directory."""
    return share_dir() / "config" / name


def policies_dir() -> Path:
    return share_dir() / "policies"
