"""Which clip and policy spec an episode ran: an explicit override (clip), the session
description, or the package's policy spec."""

from __future__ import annotations

from pathlib import Path

from asap_ros.config.policy_spec import load_policy_spec, sha256_of
from asap_ros.core.errors import AsapError, ConfigError
from asap_ros.core.policy_spec import PolicySpec
from asap_ros.core.robot import RobotModel


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
    recorded = _recorded_file(motion, session, "clip")
    if recorded is not None:
        return recorded
    return _package_spec(motion, bag, "clip", "; pass --clip PATH").clip_path


def resolve_spec(motion: str, session: dict, bag: str | Path, robot: RobotModel | None = None) -> PolicySpec:
    """The policy spec ``motion`` ran: the file the session description recorded, if it exists here
    with the recorded SHA-256; else the package's ``policies/<motion>.yaml`` (else ConfigError)."""
    recorded = _recorded_file(motion, session, "spec")
    if recorded is not None:
        try:
            return load_policy_spec(recorded, robot)
        except AsapError as exc:
            raise ConfigError(bag, "episode.motion", f"cannot load the policy spec of this motion: {exc}",
                              motion) from exc  # fmt: skip
    return _package_spec(motion, bag, "policy spec", "", robot)


def _recorded_file(motion: str, session: dict, kind: str) -> Path | None:
    """The session's ``<kind>_file`` of ``motion`` if it exists here (with the recorded SHA-256)."""
    recorded = next((p for p in session.get("policies", []) if p.get("name") == motion), None)
    if not (recorded and recorded.get(f"{kind}_file") and Path(recorded[f"{kind}_file"]).is_file()):
        return None
    path = Path(recorded[f"{kind}_file"])
    expected = recorded.get(f"{kind}_sha256")
    if expected and sha256_of(path) != expected:
        raise ConfigError(path, f"{kind}_sha256", f"{kind} differs from the one the session recorded", expected)
    return path


def _package_spec(motion: str, bag: str | Path, what: str, hint: str, robot: RobotModel | None = None) -> PolicySpec:
    from asap_ros.config.paths import policies_dir

    spec_file = policies_dir() / f"{motion}.yaml"
    if not spec_file.is_file():
        raise ConfigError(
            bag, "episode.motion",
            f"unknown {what}: the session names no usable {what} for this motion and there is no {spec_file}{hint}",
            motion,
        )  # fmt: skip
    try:
        return load_policy_spec(spec_file, robot)
    except AsapError as exc:
        raise ConfigError(bag, "episode.motion", f"cannot find the {what} of this motion: {exc}", motion) from exc
