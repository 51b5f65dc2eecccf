"""``asap-ros delta fit``: per-step Δa targets, a model of them chosen on held-out motions, the ONNX file.

Held-out groups are the motions of the training data (two or more), else its recordings, else
none (then a ``joint`` model with fixed settings, and the report says that nothing was held
out). Ridge penalties and MLP epochs are chosen on the held-out groups' targets; the model kind
(``auto``) by what the protocol measures: each candidate, fitted without a group, replays that
group's recordings, and the lowest mean change of E_mpjpe at 0.5 s wins; when none beats Δa = 0
(change 0 by definition) the answer is no delta, a zero model, and the report says so. The
final model is fitted on all the data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.export import implied_scale
from asap_ros.export.delta import DELTA_INPUT_DIM, term_offset
from asap_ros.export.delta_regression import (
    AUTO,
    JOINT,
    JOINT_ALPHA,
    MLP,
    MODEL_KINDS,
    NONE,
    RIDGE,
    RIDGE_ALPHAS,
    FittedModel,
    fit_joint,
    fit_mlp,
    fit_ridge,
    unexplained,
    zero_model,
)
from asap_ros.export.delta_targets import DETERMINED, HORIZON_TICKS, DeltaTargetFitter, DeltaTargets
from asap_ros.export.motion_rows import MotionRows
from asap_ros.export.onnx_file import ClampFeature, write_mlp_onnx
from asap_ros.export.openloop import TARGETS_METADATA, OpenLoopReplayer, run_openloop
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
    targets: str
    """The simulator's target semantics the Δa were fitted under: ``trainer`` or ``runtime``."""
    held_out_by: str
    """``motion``, ``recording`` or ``nothing``."""
    kind: str
    setting: str
    validation: dict[str, dict[str, float]]
    """candidate -> held-out group -> relative change of the group's E_mpjpe at 0.5 s when replayed
    with the candidate fitted on the other groups (negative: the delta helps)."""
    conditioning: list[JointConditioning]
    residual_before_median: float
    residual_after_median: float
    train_unexplained: float
    notes: list[str] = field(default_factory=list)
    fit_ticks: int = HORIZON_TICKS
    """Policy steps each transition's target was fitted over."""
    implied_torque_scale: dict[str, float | None] = field(default_factory=dict)
    """Joint -> the torque scale the model implies on its training inputs (:mod:`asap_ros.export.implied_scale`)."""

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


def _ridge_alphas(targets: DeltaTargets, groups: np.ndarray, clamp: ClampFeature | None) -> np.ndarray:
    """Per output joint, the ridge penalty with the lowest held-out squared error of the targets."""
    errors = np.zeros((len(RIDGE_ALPHAS), targets.targets.shape[1]))
    for group in sorted(set(groups)):
        held = groups == group
        x, y = targets.inputs[held].astype(np.float64), targets.targets[held]
        for n, alpha in enumerate(RIDGE_ALPHAS):
            model = fit_ridge(targets.inputs[~held].astype(np.float64), targets.targets[~held], alpha, clamp)
            errors[n] += np.sum((model.predict(x) - y) ** 2, axis=0)
    return np.array(RIDGE_ALPHAS)[np.argmin(errors, axis=0)]


def _mlp_epochs(targets: DeltaTargets, groups: np.ndarray, clamp: ClampFeature | None) -> int:
    """Epochs with the lowest mean held-out error of the targets."""
    curves = []
    for group in sorted(set(groups)):
        held = groups == group
        x, y = targets.inputs[held], targets.targets[held]
        curves.append(fit_mlp(targets.inputs[~held], targets.targets[~held], clamp=clamp,
                              monitor=lambda model, x=x, y=y: unexplained(model, x, y))[1])  # fmt: skip
    return int(np.argmin(np.mean(curves, axis=0))) + 1


Fit = Callable[[np.ndarray, np.ndarray], FittedModel]
Score = Callable[[FittedModel, str], float | None]
"""Held-out score of a model on one group: the relative change of E_mpjpe at 0.5 s in its replay
(``None``: the group has no window to replay)."""


def candidates(targets: DeltaTargets, groups: np.ndarray, kind: str, clamp: ClampFeature | None) -> dict[str, Fit]:
    """The model fits to compare, their settings chosen on the held-out groups' targets."""
    found: dict[str, Fit] = {}
    if kind in (JOINT, AUTO):
        found[f"joint alpha={JOINT_ALPHA:g}"] = lambda x, y: fit_joint(x, y, clamp)
    if kind in (RIDGE, AUTO):
        alphas = _ridge_alphas(targets, groups, clamp)
        found["ridge, alpha per joint"] = lambda x, y: fit_ridge(x, y, alphas, clamp)
    if kind in (MLP, AUTO):
        epochs = _mlp_epochs(targets, groups, clamp)
        found[f"mlp epochs={epochs}"] = lambda x, y: fit_mlp(x, y, epochs=epochs, clamp=clamp)[0]
    return found


def choose_model(targets: DeltaTargets, score: Score, kind: str = AUTO, clamp: ClampFeature | None = None
                 ) -> tuple[FittedModel, dict[str, dict[str, float]], str]:  # fmt: skip
    """The model of ``kind`` (``auto``: the one whose held-out replays improve most), fitted on all the
    data; ``clamp``: the models also read the joint-limit cut of the recorded action's target."""
    if kind not in MODEL_KINDS:
        raise ConfigError(None, "--model", f"must be one of {', '.join(MODEL_KINDS)}", kind)
    held_out_by, groups = held_out_groups(targets)
    x, y = targets.inputs.astype(np.float64), targets.targets
    if held_out_by == "nothing":
        fit = {RIDGE: lambda: fit_ridge(x, y, DEFAULT_ALPHA, clamp), MLP: lambda: fit_mlp(x, y, clamp=clamp)[0]}
        return fit.get(kind, lambda: fit_joint(x, y, clamp))(), {}, held_out_by
    fits = candidates(targets, groups, kind, clamp)
    validation: dict[str, dict[str, float]] = {}
    for name, fit in fits.items():
        validation[name] = {}
        for group in sorted(set(groups)):
            held = groups == group
            value = score(fit(x[~held], y[~held]), str(group))
            if value is not None:
                validation[name][str(group)] = value
    judged = {name: scores for name, scores in validation.items() if scores}
    if not judged:  # no held-out group is long enough to replay: the kind asked for, else per joint
        name = next((n for n in fits if n.split()[0].rstrip(",") == kind), None)
        return (fits[name](x, y) if name else fit_joint(x, y, clamp)), validation, held_out_by
    if kind == AUTO:  # Δa = 0 replays exactly as without: the held-out change is 0 by definition
        fits[NONE] = lambda x, y: zero_model(x.shape[1], y.shape[1])
        judged[NONE] = validation[NONE] = {group: 0.0 for group in next(iter(judged.values()))}
    best = min(judged, key=lambda name: float(np.mean(list(judged[name].values()))))
    return fits[best](x, y), validation, held_out_by


def replay_score(recordings: Sequence[MotionRows], held_out_by: str, replayer: OpenLoopReplayer,
                 skip_start_s: float) -> Score:  # fmt: skip
    """Score a model by replaying the held-out group's recordings with it (1 s windows every 1 s)."""

    def score(model: FittedModel, group: str) -> float | None:
        rows = [r for r in recordings if (r.motion if held_out_by == "motion" else r.name) == group]
        result = run_openloop(rows, replayer, 1.0, 1.0, model.as_delta(), skip_start_s=skip_start_s)
        if not result.windows:
            return None
        before = [w.scores["without"].metrics[0.5]["mpjpe_mm"] for w in result.windows]
        after = [w.scores["with"].metrics[0.5]["mpjpe_mm"] for w in result.windows]
        return float(np.mean(after) / np.mean(before) - 1.0)

    return score


def conditioning(targets: DeltaTargets, joint_names: Sequence[str]) -> list[JointConditioning]:
    size = np.abs(ACTION_SCALE * targets.targets).mean(axis=0)
    return [JointConditioning(name, float(np.median(targets.resolution[:, j])),
                              float(np.mean(targets.resolution[:, j] >= DETERMINED)), float(size[j]))
            for j, name in enumerate(joint_names)]  # fmt: skip


def fit_delta(recordings: Sequence[MotionRows], replayer: OpenLoopReplayer, kind: str = AUTO, threads: int = 1,
              on_step: Callable[[int], None] | None = None, skip_start_s: float = 0.0,
              fit_ticks: int = HORIZON_TICKS) -> tuple[FittedModel, FitReport, DeltaTargets]:  # fmt: skip
    """Targets of every transition (after the first ``skip_start_s`` of each recording; each fitted over
    ``fit_ticks`` policy steps), the chosen model, and the report."""
    targets = DeltaTargetFitter(replayer, threads, horizon=fit_ticks).fit(recordings, on_step, skip_start_s)
    if len(targets) < MIN_TICKS:
        raise ConfigError(recordings[0].source if recordings else None, "recordings",
                          f"too few transitions to fit a delta model (at least {MIN_TICKS})", len(targets))  # fmt: skip
    held_out_by, _ = held_out_groups(targets)
    score = replay_score(recordings, held_out_by, replayer, skip_start_s)
    clamp = None if replayer.sim.clamps_targets else clamp_feature(replayer.sim)  # runtime targets: the sim clips
    model, validation, held_out_by = choose_model(targets, score, kind, clamp)
    names = [replayer.sim.robot.joint_names[i] for i in DRIVEN_MOTORS]
    report = FitReport(
        ticks=len(targets), recordings=[r.name for r in recordings], motions=sorted({r.motion for r in recordings}),
        targets=replayer.sim.target_semantics, held_out_by=held_out_by, kind=model.kind, setting=model.setting, validation=validation,
        conditioning=conditioning(targets, names),
        residual_before_median=float(np.median(targets.residual_before)),
        residual_after_median=float(np.median(targets.residual_after)),
        train_unexplained=unexplained(model, targets.inputs.astype(np.float64), targets.targets), fit_ticks=fit_ticks,
        implied_torque_scale=implied_scale.to_dict(names, implied_scale.model_scale(
            model.as_delta(), targets.inputs, replayer.sim.robot, replayer.sim.clamps_targets)),
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
        TARGETS_METADATA: replayer.sim.target_semantics,
        "asap_ros.delta.validation": json.dumps(report.validation),
    }
    layers = [(w.astype(np.float32), b.astype(np.float32)) for w, b in model.layers]
    return write_mlp_onnx(path, layers, metadata, model.clamp)


def report_text(report: FitReport) -> str:
    lines = [f"{report.ticks} transitions of {len(report.recordings)} recording(s), motions: {', '.join(report.motions)}; "
             f"targets: {report.targets}; each Δa fitted over {report.fit_ticks} policy step(s)",
             f"one-step residual |r| median: {report.residual_before_median * 1e3:.1f} without Δa, "
             f"{report.residual_after_median * 1e3:.1f} with the fitted targets (rad / m, ×1000)",
             f"held out by {report.held_out_by}; change of the held-out E_mpjpe at 0.5 s with each candidate:"]  # fmt: skip
    for candidate, scores in report.validation.items():
        lines.append(f"  {candidate:<24} " + ", ".join(f"{g}: {v:+.1%}" for g, v in scores.items())
                     + f"  (mean {np.mean(list(scores.values())):+.1%})")  # fmt: skip
    lines.append(f"model: {report.kind} ({report.setting}); unexplained on its training data {report.train_unexplained:.3f}")
    lines.append("per joint: mean |0.25·Δa| of the targets (mrad), median resolution, share of steps determined:")
    for c in sorted(report.conditioning, key=lambda c: -c.mean_abs_scaled_target_rad):
        flag = "" if c.determined else "   NOT DETERMINED by the data (the regulariser sets it)"
        lines.append(f"  {c.joint:<28} {c.mean_abs_scaled_target_rad * 1e3:7.2f}  {c.median_resolution:5.2f}  "
                     f"{c.determined_share:4.0%}{flag}")  # fmt: skip
    lines.append("implied torque scale per joint (the model on its training inputs), furthest from 100 % first:")
    lines += implied_scale.scale_lines(report.implied_torque_scale)
    if report.undetermined:
        lines.append(f"the data cannot determine Δa for: {', '.join(report.undetermined)}")
    else:
        lines.append("every joint's Δa is determined by the data at most steps")
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)
