"""ASAP's assets (every file against its SHA-256) and the policy specs asap_deploy will load."""

from __future__ import annotations

from pathlib import Path

from asap_ros.core.errors import AsapError
from asap_ros.core.robot import RobotModel
from asap_ros.doctor.report import Check, fail, ok


def check_assets(assets_dir: str | None) -> list[Check]:
    from asap_ros.config import assets

    try:
        root = assets.asset_root(assets_dir)
    except AsapError as exc:
        return [fail("assets", str(exc), "asap-ros assets fetch, or export ASAP_ASSETS=/path/to/asap-assets")]
    report = assets.verify(root)
    if not report.ok:
        problems = report.problems()
        return [fail("assets", f"{len(problems)} of {report.checked} files bad in {root}: {'; '.join(problems[:3])}"
                     + (" ..." if len(problems) > 3 else ""),
                     f"asap-ros assets fetch --dest {root} (replaces bad files, keeps valid ones)")]  # fmt: skip
    return [ok("assets", f"{report.checked} files match their SHA-256 in {root}")]


def check_policies(specs: list[Path], robot: RobotModel, assets_dir: str | None) -> list[Check]:
    """Each spec as ``asap-ros check-policy`` runs it: spec, actor checksum and shapes, its clip, one step."""
    import numpy as np

    from asap_ros.config.assets import asset_root
    from asap_ros.runtime.policies import run_zero_observation

    try:
        asset_root(assets_dir)
    except AsapError:
        names = ", ".join(p.stem for p in specs)
        return [fail("policies", f"not checked ({names}): no asset folder", "see the assets line above")]
    checks = []
    for path in specs:
        name = f"policy {path.stem}"
        try:
            spec, action = run_zero_observation(path, robot, assets_dir)
        except (AsapError, OSError) as exc:
            checks.append(fail(name, str(exc), f"asap-ros check-policy {path} shows the details; fix the spec or "
                               "asap-ros assets fetch"))  # fmt: skip
            continue
        clip = f"clip {spec.clip_path.name} ({spec.clip_duration_s:.2f} s)" if spec.is_motion else "standing actor"
        if not np.all(np.isfinite(action)):
            checks.append(fail(name, f"{spec.actor_path.name} returns non-finite actions on the zero observation",
                               "replace the actor (asap-ros check-policy shows it)"))
        else:
            checks.append(ok(name, f"{spec.actor_path.name} sha256 ok, [1, {spec.input_dim}] -> "
                                   f"[1, {spec.output_dim}], {clip}"))  # fmt: skip
    return checks
