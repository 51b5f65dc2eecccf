"""The summary JSON of a simulated run (``asap-ros sim`` and ``asap-ros rollout`` alike).

Schema ``asap_ros.run_summary/1``::

    schema, kind ("sim": real time over DDS | "rollout": lock-step in one process),
    started_at (ISO 8601, UTC), wall_time_s, sim_time_s,
    policy {name, spec, actor, clip}, profile,
    outcome ("completed" or why the run ended early), fault (latched DAMPING reason or null),
    fell, fall_height_m, min_pelvis_height_m,
    tracking (null if the actor ran < 4 steps) {frames, g_mpjpe_mm, mpjpe_mm, vel_mm_per_frame,
        acc_mm_per_frame2, success, max_mean_body_distance_m, first_failure_frame,
        per_body_g_mpjpe_mm, per_body_mpjpe_mm, joint_rmse_rad, actor_steps, missing_steps,
        completed, heading_offset_rad},
    timing (null for rollout) {steps, deadline_misses, skipped_periods, latency_p50_us,
        latency_p99_us, latency_max_us, compute_p50_us, compute_p99_us, compute_max_us, ...},
    sim {counters of the simulator}, timeline [{t_s, what}], files {name: path},
    motion_ticks ([first, last] LowState ticks (ms) of the TRACKING steps' states; null if none)
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from asap_ros.core.errors import ConfigError
from asap_ros.sim.session import OperatorScript, RunSetup
from asap_ros.tracking.evaluation import FALL_HEIGHT_M, RunTrace, evaluate_tracking

SCHEMA = "asap_ros.run_summary/1"
KINDS = ("sim", "rollout")


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    spec: str
    actor: str
    clip: str


@dataclass
class RunSummary:
    kind: str
    started_at: str
    policy: PolicyInfo
    profile: str
    outcome: str
    fault: str | None
    fell: bool
    fall_height_m: float
    min_pelvis_height_m: float
    tracking: dict[str, Any] | None
    timing: dict[str, Any] | None
    sim: dict[str, Any]
    wall_time_s: float
    sim_time_s: float
    timeline: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    motion_ticks: tuple[int, int] | None = None
    schema: str = SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return _finite(asdict(self))


def _finite(value: Any) -> Any:
    """NaN/inf become null: JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def write_summary(summary: RunSummary, path: str | Path) -> Path:
    """Write ``summary`` as indented JSON (parent directories created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary.to_dict(), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return path


def load_summary(path: str | Path) -> dict[str, Any]:
    """Read a summary JSON, checking its schema and the keys every consumer relies on."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(path, None, f"cannot read summary JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ConfigError(path, "schema", f"not a run summary (expected {SCHEMA})", data.get("schema") if isinstance(data, dict) else data)
    for key in ("kind", "outcome", "fell", "min_pelvis_height_m", "tracking", "timing", "sim", "policy"):
        if key not in data:
            raise ConfigError(path, key, "required key missing")
    if data["kind"] not in KINDS:
        raise ConfigError(path, "kind", f"must be one of {', '.join(KINDS)}", data["kind"])
    return data


def format_result(summary: dict[str, Any]) -> str:
    """A few human-readable lines: outcome, fall, tracking errors, timing."""
    policy = summary["policy"]
    lines = [
        f"{summary['kind']} {policy['name']} (profile {summary['profile']}): {summary['outcome']}",
        f"  fell: {'YES' if summary['fell'] else 'no'} (lowest pelvis {_num(summary['min_pelvis_height_m'], '.3f')} m)",
    ]
    if summary.get("fault"):
        lines.append(f"  fault: {summary['fault']}")
    tracking = summary.get("tracking")
    if tracking:
        lines.append(
            f"  tracking over {tracking['frames']} frames: E_g-mpjpe {tracking['g_mpjpe_mm']:.1f} mm, "
            f"E_mpjpe {tracking['mpjpe_mm']:.1f} mm, E_vel {tracking['vel_mm_per_frame']:.2f} mm/frame, "
            f"E_acc {tracking['acc_mm_per_frame2']:.2f} mm/frame^2, success {tracking['success']}"
            + ("" if tracking["completed"] else " (motion NOT completed)")
        )
    else:
        lines.append("  tracking: none (the actor did not run)")
    timing = summary.get("timing")
    if timing:
        lines.append(
            f"  step latency (LowState arrival -> LowCmd write) p50 {_num(timing.get('latency_p50_us'), '.0f')} us, "
            f"p99 {_num(timing.get('latency_p99_us'), '.0f')} us, max {_num(timing.get('latency_max_us'), '.0f')} us; "
            f"deadline misses {timing['deadline_misses']} of {timing['steps']} steps"
        )
    return "\n".join(lines)


def _num(value: Any, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def summarize_run(
    kind: str,
    setup: RunSetup,
    script: OperatorScript,
    trace: RunTrace,
    *,
    profile: str,
    started_at: str,
    wall_time_s: float,
    sim_time_s: float,
    timing: dict[str, Any] | None,
    sim_stats: dict[str, Any],
    files: dict[str, str],
) -> RunSummary:
    """Assemble the summary of a finished run (tracking metrics computed here)."""
    spec = setup.policy.spec
    tracking = evaluate_tracking(trace, setup.clip, setup.robot.joint_names)
    return RunSummary(
        kind=kind,
        started_at=started_at,
        policy=PolicyInfo(name=spec.name, spec=str(spec.source), actor=str(spec.actor_path), clip=str(spec.clip_path)),
        profile=profile,
        outcome=script.outcome or "interrupted",
        fault=setup.controller.fault_reason,
        fell=trace.fell(),
        fall_height_m=FALL_HEIGHT_M,
        min_pelvis_height_m=trace.min_pelvis_height(),
        tracking=tracking.to_dict() if tracking is not None else None,
        timing=timing,
        sim=sim_stats,
        wall_time_s=wall_time_s,
        sim_time_s=sim_time_s,
        timeline=[asdict(event) for event in script.timeline],
        files=files,
        motion_ticks=trace.motion_ticks(),
    )
