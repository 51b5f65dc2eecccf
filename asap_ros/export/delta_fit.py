"""``asap-ros delta fit``: per-step Δa targets, a model of them chosen on held-out motions, the ONNX file.

Held-out groups are the motions of the training data (two or more), else its recordings, else
none (then the settings are fixed and the report says that nothing was held out). Ridge
penalties and MLP epochs are chosen by their mean error over the held-out groups; ``auto``
keeps whichever of the two is lower there. The final model is fitted on all the data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.export.delta import DELTA_INPUT_DIM, term_offset
from asap_ros.export.delta_regression import (
    AUTO,
    MLP,
    MODEL_KINDS,
    RIDGE,
    RIDGE_ALPHAS,
    FittedModel,
    fit_mlp,
    fit_ridge,
    unexplained,
)
from asap_ros.export.delta_targets import DETERMINED, DeltaTargetFitter, DeltaTargets
from asap_ros.export.motion_rows import MotionRows
from asap_ros.export.onnx_file import ClampFeature, write_mlp_onnx
from asap_ros.export.openloop import OpenLoopReplayer
from asap_ros.export.trainer_sim import ACTION_SCALE, TrainerSim
from asap_ros.tracking.kinematics import DRIVEN_MOTORS, NUM_DRIVEN

DEFAULT_ALPHA = 1.0
"""Ridge penalty when nothing can be held out to choose one."""
MIN_TICKS = 50
"""Fewer transitions than this cannot constrain 108 inputs."""


@dataclass(frozen=True)
class JointConditioning:
    joint: str
    median_resolution: float
    determined_share: float
    """Share of steps whose resolution is at least ``DETERMINED``."""
    mean_abs_scaled_target_rad: float
    """Mean |0.25·Δa| of the fitted targets."""

    @property
    def determined(self) -> bool:
        return self.determined_share >= 0.5


@dataclass
class FitReport:
    ticks: int
    recordings: list[str]
    motions: list[str]
    held_out_by: str
    """``motion``, ``recording`` or ``nothing``."""
    kind: str
    setting: str
    validation: dict[str, dict[str, float]]
    """candidate -> held-out group -> unexplained share of the targets (1: no better than Δa = 0)."""
    conditioning: list[JointConditioning]
    residual_before_median: float
    residual_after_median: float
    train_unexplained: float
    notes: list[str] = field(default_factory=list)

    @property
    def undetermined(self) -> list[str]:
        return [c.joint for c in self.conditioning if not c.determined]

    def to_dict(self) -> dict:
        out = asdict(self)
        out["undetermined"] = self.undetermined
        return out


def held_out_groups(targets: DeltaTargets) -> tuple[str, np.ndarray]:
    """What to hold out (``motion``, ``recording`` or ``nothing``) and each tick's group."""
    if len(set(targets.motions)) >= 2:
        return "motion", targets.motions
    if len(set(targets.names)) >= 2:
        return "recording", targets.names
    return "nothing", np.zeros(len(targets), dtype=object)


def clamp_feature(sim: TrainerSim) -> ClampFeature:
    """The joint-limit cut of ``0.25·actions_open_loop + default`` for the robot model's limits."""
    at, scale = term_offset("actions_open_loop")
    weight = np.zeros((DELTA_INPUT_DIM, NUM_DRIVEN))
    weight[at + np.arange(NUM_DRIVEN), np.arange(NUM_DRIVEN)] = ACTION_SCALE / scale
    robot = sim.robot
    return ClampFeature(weight, sim.driven_default.copy(), robot.q_lower[DRIVEN_MOTORS], robot.q_upper[DRIVEN_MOTORS])


def _ridge_alphas(targets: DeltaTargets, groups: np.ndarray, clamp: ClampFeature | None
                  ) -> tuple[np.ndarray, dict[str, float]]:  # fmt: skip
    """Per output joint, the penalty with the lowest held-out squared error (summed over groups), and
    the held-out groups' errors with those penalties."""
    errors = np.zeros((len(RIDGE_ALPHAS), targets.targets.shape[1]))
    per_group = {}
    for group in sorted(set(groups)):
        held = groups == group
        x, y = targets.inputs[held].astype(np.float64), targets.targets[held]
        rows = []
        for alpha in RIDGE_ALPHAS:
            model = fit_ridge(targets.inputs[~held].astype(np.float64), targets.targets[~held], alpha, clamp)
            rows.append(np.sum((model.predict(x) - y) ** 2, axis=0))
        per_group[str(group)] = (np.array(rows), np.sum(y**2, axis=0))
        errors += per_group[str(group)][0]
    best = np.argmin(errors, axis=0)
    alphas = np.array(RIDGE_ALPHAS)[best]
    joints = np.arange(len(best))
    scores = {g: float(sq[best, joints].sum() / total.sum()) for g, (sq, total) in per_group.items()}
    return alphas, scores


def _mlp_epochs(targets: DeltaTargets, groups: np.ndarray, clamp: ClampFeature | None) -> tuple[int, dict[str, float]]:
    """Epochs with the lowest mean held-out error, and the per-group errors there."""
    curves = {}
    for group in sorted(set(groups)):
        held = groups == group
        x, y = targets.inputs[held], targets.targets[held]
        _, curves[str(group)] = fit_mlp(targets.inputs[~held], targets.targets[~held], clamp=clamp,
                                        monitor=lambda model, x=x, y=y: unexplained(model, x, y))  # fmt: skip
    mean = np.mean(list(curves.values()), axis=0)
    best = int(np.argmin(mean))
    return best + 1, {g: float(c[best]) for g, c in curves.items()}


def choose_model(targets: DeltaTargets, kind: str = AUTO, clamp: ClampFeature | None = None
                 ) -> tuple[FittedModel, dict[str, dict[str, float]], str]:  # fmt: skip
    """The model of ``kind`` (or the better one, ``auto``) with settings chosen on held-out groups;
    ``clamp``: the models also read the joint-limit cut of the recorded action's target."""
    if kind not in MODEL_KINDS:
        raise ConfigError(None, "--model", f"must be one of {', '.join(MODEL_KINDS)}", kind)
    held_out_by, groups = held_out_groups(targets)
    x, y = targets.inputs.astype(np.float64), targets.targets
    validation: dict[str, dict[str, float]] = {}
    candidates: dict[str, tuple[float, Callable[[], FittedModel]]] = {}
    if held_out_by == "nothing":
        if kind in (RIDGE, AUTO):
            return fit_ridge(x, y, DEFAULT_ALPHA, clamp), validation, held_out_by
        return fit_mlp(x, y, clamp=clamp)[0], validation, held_out_by
    if kind in (RIDGE, AUTO):
        alphas, scores = _ridge_alphas(targets, groups, clamp)
        name = "ridge, alpha per joint"
        validation[name] = scores
        candidates[name] = (float(np.mean(list(scores.values()))), lambda: fit_ridge(x, y, alphas, clamp))
    if kind in (MLP, AUTO):
        epochs, scores = _mlp_epochs(targets, groups, clamp)
        validation[f"mlp epochs={epochs}"] = scores
        candidates[f"mlp epochs={epochs}"] = (float(np.mean(list(scores.values()))),
                                              lambda: fit_mlp(x, y, epochs=epochs, clamp=clamp)[0])  # fmt: skip
    best = min(candidates, key=lambda name: candidates[name][0])
    return candidates[best][1](), validation, held_out_by


def conditioning(targets: DeltaTargets, joint_names: Sequence[str]) -> list[JointConditioning]:
    size = np.abs(ACTION_SCALE * targets.targets).mean(axis=0)
    return [JointConditioning(name, float(np.median(targets.resolution[:, j])),
                              float(np.mean(targets.resolution[:, j] >= DETERMINED)), float(size[j]))
            for j, name in enumerate(joint_names)]  # fmt: skip


def fit_delta(recordings: Sequence[MotionRows], replayer: OpenLoopReplayer, kind: str = AUTO, threads: int = 1,
              on_step: Callable[[int], None] | None = None, skip_start_s: float = 0.0,
              ) -> tuple[FittedModel, FitReport, DeltaTargets]:  # fmt: skip
    """Targets of every transition (after the first ``skip_start_s`` of each recording), the chosen
    model, and the report."""
    targets = DeltaTargetFitter(replayer, threads).fit(recordings, on_step, skip_start_s)
    if len(targets) < MIN_TICKS:
        raise ConfigError(recordings[0].source if recordings else None, "recordings",
                          f"too few transitions to fit a delta model (at least {MIN_TICKS})", len(targets))  # fmt: skip
    model, validation, held_out_by = choose_model(targets, kind, clamp_feature(replayer.sim))
    names = [replayer.sim.robot.joint_names[i] for i in DRIVEN_MOTORS]
    report = FitReport(
        ticks=len(targets), recordings=[r.name for r in recordings], motions=sorted({r.motion for r in recordings}),
        held_out_by=held_out_by, kind=model.kind, setting=model.setting, validation=validation,
        conditioning=conditioning(targets, names),
        residual_before_median=float(np.median(targets.residual_before)),
        residual_after_median=float(np.median(targets.residual_after)),
        train_unexplained=unexplained(model, targets.inputs.astype(np.float64), targets.targets),
    )  # fmt: skip
    if held_out_by == "nothing":
        report.notes.append("one recording of one motion: nothing could be held out; the model's settings are fixed "
                            "defaults and its error on new motions is unknown")  # fmt: skip
    elif held_out_by == "recording":
        report.notes.append("one motion: recordings were held out instead of motions; the model's error on other "
                            "motions is unknown")  # fmt: skip
    return model, report, targets


def write_model(model: FittedModel, report: FitReport, path: str | Path, replayer: OpenLoopReplayer) -> Path:
    """The ONNX file (ASAP's shape) with the fit's description in its metadata."""
    metadata = {
        "asap_ros.delta.kind": model.kind + (" with the joint-limit cut of the action's target" if model.clamp else ""),
        "asap_ros.delta.setting": model.setting,
        "asap_ros.delta.motions": ",".join(report.motions),
        "asap_ros.delta.ticks": str(report.ticks),
        "asap_ros.delta.simulator": replayer.sim.description,
        "asap_ros.delta.reset_velocity": replayer.reset_velocity,
        "asap_ros.delta.validation": json.dumps(report.validation),
    }
    layers = [(w.astype(np.float32), b.astype(np.float32)) for w, b in model.layers]
    return write_mlp_onnx(path, layers, metadata, model.clamp)


def report_text(report: FitReport) -> str:
    lines = [f"{report.ticks} transitions of {len(report.recordings)} recording(s), motions: {', '.join(report.motions)}",
             f"one-step residual |r| median: {report.residual_before_median * 1e3:.1f} without Δa, "
             f"{report.residual_after_median * 1e3:.1f} with the fitted targets (rad / m, ×1000)",
             f"held out by {report.held_out_by}; unexplained share of the targets (1 = no better than Δa = 0):"]  # fmt: skip
    for candidate, scores in report.validation.items():
        lines.append(f"  {candidate:<22} " + ", ".join(f"{g}: {v:.3f}" for g, v in scores.items())
                     + f"  (mean {np.mean(list(scores.values())):.3f})")  # fmt: skip
    lines.append(f"model: {report.kind} ({report.setting}); unexplained on its training data {report.train_unexplained:.3f}")
    lines.append("per joint: mean |0.25·Δa| of the targets (mrad), median resolution, share of steps determined:")
    for c in sorted(report.conditioning, key=lambda c: -c.mean_abs_scaled_target_rad):
        flag = "" if c.determined else "   NOT DETERMINED by the data (the regulariser sets it)"
        lines.append(f"  {c.joint:<28} {c.mean_abs_scaled_target_rad * 1e3:7.2f}  {c.median_resolution:5.2f}  "
                     f"{c.determined_share:4.0%}{flag}")  # fmt: skip
    if report.undetermined:
        lines.append(f"the data cannot determine Δa for: {', '.join(report.undetermined)}")
    else:
        lines.append("every joint's Δa is determined by the data at most steps")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)
