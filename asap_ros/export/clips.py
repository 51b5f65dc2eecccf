"""Which clip an episode tracked: an explicit override, the session description, or the policy spec."""

from __future__ import annotations

from pathlib import Path

from asap_ros.config.policy_spec import sha256_of
from asap_ros.core.errors import AsapError, ConfigError


def resolve_clip(motion: str, session: dict, bag: str | Path, override: str | Path | None = None) -> Path:
    """Path of the clip ``motion`` tracked.

    Order: ``override`` (must exist); the clip the session description recorded for the motion,
    if that file exists here and still has the recorded SHA-256; the package's
    ``policies/<motion>.yaml``. Anything else is a :class:`ConfigError` naming the motion.
    """
    if override is not None:
        path = Path(override)
        if not path.is_file():
            raise ConfigError(path, None, "clip file not found")
        return path
    recorded = next((p for p in session.get("policies", []) if p.get("name") == motion), None)
    if recorded and recorded.get("clip_file") and Path(recorded["clip_file"]).is_file():
        path = Path(recorded["clip_file"])
        expected = recorded.get("clip_sha256")
        if expected and sha256_of(path) != expected:
            raise ConfigError(path, "clip_sha256", "clip differs from the one the session recorded", expected)
        return path
    return _spec_clip(motion, bag)


def _spec_clip(motion: str, bag: str | Path) -> Path:
    from asap_ros.config.paths import policies_dir
    from asap_ros.config.policy_spec import load_policy_spec

    spec_file = policies_dir() / f"{motion}.yaml"
    if not spec_file.is_file():
        raise ConfigError(
            bag, "episode.motion",
            f"unknown clip: the session names no usable clip for this motion and there is no {spec_file}; "
            "pass --clip PATH", motion,
        )  # fmt: skip
    try:
        return load_policy_spec(spec_file).clip_path
    except AsapError as exc:
        raise ConfigError(bag, "episode.motion", f"cannot find the clip of this motion: {exc}", motion) from exc
