"""Locating ASAP's published assets (actors, clips, deploy config, G1 model).

Search order: an explicit directory (the ``assets_dir`` config key), the ``ASAP_ASSETS``
environment variable, the workplace copy ``../shared/asap-assets`` beside the source
checkout, then the user cache (``$XDG_CACHE_HOME/asap_ros/assets``).
"""

from __future__ import annotations

import os
from pathlib import Path

from asap_ros.errors import AssetError
from asap_ros.paths import share_dir

ENV_VAR = "ASAP_ASSETS"
MARKER = "SOURCE.md"


def user_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "asap_ros" / "assets"


def candidate_dirs(explicit: str | os.PathLike | None = None) -> list[tuple[str, Path]]:
    """Every place searched, in order, with where each came from."""
    found: list[tuple[str, Path]] = []
    if explicit:
        found.append(("assets_dir config key", Path(explicit).expanduser()))
    if os.environ.get(ENV_VAR):
        found.append((f"${ENV_VAR}", Path(os.environ[ENV_VAR]).expanduser()))
    found.append(("workplace copy", share_dir().parent / "shared" / "asap-assets"))
    found.append(("user cache", user_cache_dir()))
    return found


def asset_root(explicit: str | os.PathLike | None = None) -> Path:
    """The first asset directory that exists; an explicit or env location must exist."""
    for origin, path in candidate_dirs(explicit):
        if path.is_dir() and (path / MARKER).is_file():
            return path.resolve()
        if origin != "workplace copy" and origin != "user cache":
            raise AssetError(f"ASAP assets not found at {path} (from {origin}): no {MARKER} there")
    searched = "; ".join(f"{o}: {p}" for o, p in candidate_dirs(explicit))
    raise AssetError(
        f"ASAP assets not found (searched {searched}). Set {ENV_VAR} to a folder with ASAP's "
        f"policies/, motions/, config/ and robots/, or run `asap-ros assets fetch`."
    )


def asset_path(relative: str | os.PathLike, explicit: str | os.PathLike | None = None) -> Path:
    """Absolute path of one asset file; a missing file is an :class:`AssetError`."""
    path = asset_root(explicit) / relative
    if not path.exists():
        raise AssetError(f"asset {relative} missing from {asset_root(explicit)}")
    return path
