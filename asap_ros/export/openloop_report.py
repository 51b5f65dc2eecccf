"""``asap-ros openloop``'s figures: metric tables with intervals, per-joint errors, the delta's
per-joint size (the paper's Fig. 13 statistic), the data checks; as text, JSON and a PNG."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from asap_ros.export import closable_gap, implied_scale
from asap_ros.export.intervals import mean_interval, relative_change
from asap_ros.export.openloop import (
    FINETUNE,
    HORIZONS_S,
    LAG_HORIZON_S,
    LAGS,
    METRICS,
    PHYSICS_RATE,
    WITH,
    WITHOUT,
    OpenLoopResult,
)
from asap_ros.export.trainer_sim import RUNTIME_TARGETS, TRAINER_TARGETS

SCHEMA = "asap_ros.openloop/1"
LAG_MARGIN = 0.10
"""The recorded pairing (lag 0) must beat the actions shifted by one step by at least this much."""
METRIC_LABELS = {"g_mpjpe_mm": "E_g-mpjpe mm", "mpjpe_mm": "E_mpjpe mm", "vel_mm_per_frame": "E_vel mm/frame",
                 "acc_mm_per_frame2": "E_acc mm/frame²"}  # fmt: skip
MRAD = 1000.0
TARGETS_MEANING = {TRAINER_TARGETS: "ASAP's trainer, no joint-limit clamp",
                   RUNTIME_TARGETS: "clipped to the joint limits as the runtime sent them"}  # fmt: skip
REPLAYS = (WITHOUT, WITH, PHYSICS_RATE, FINETUNE)
TITLES = {WITHOUT: "without Δa", WITH: "with Δa", PHYSICS_RATE: "Δa every physics step",
          FINETUNE: "Δa as fine-tuning adds it"}  # fmt: skip
MIN_MEDIAN_RAD = 1e-6
"""Below this the median joint's |0.25·Δa| is zero (a model that leaves most joints alone): no ratio."""


def columns(result: OpenLoopResult) -> list[str]:
    """The replays present: ``without``, ``with``, ``physics_rate``, ``finetune``."""
    return [c for c in REPLAYS if result.windows and c in result.windows[0].scores]


def metric_values(result: OpenLoopResult, column: str, horizon: float, metric: str) -> np.ndarray:
    return np.array([w.scores[column].metrics[horizon][metric] for w in result.windows])


def joint_errors(result: OpenLoopResult, column: str, horizon: float) -> np.ndarray:
    """(windows, 23) mean joint-angle error, rad."""
    return np.array([w.scores[column].joint_error[horizon] for w in result.windows])


def delta_size(result: OpenLoopResult, column: str = WITH) -> np.ndarray:
    """(23,) mean |target offset| the delta added per joint over all windows, rad."""
    return np.mean([w.scores[column].mean_applied_delta for w in result.windows], axis=0)


def delta_ranking(result: OpenLoopResult, column: str = WITH) -> list[dict]:
    """Joints by decreasing mean |0.25·Δa| (``finetune``: |Δa|), with the ratio to the median joint."""
    size = delta_size(result, column)
    median = float(np.median(size))
    return [{"rank": n + 1, "joint": result.joint_names[j], "mean_abs_rad": float(size[j]),
             "ratio_to_median": float(size[j] / median) if median > MIN_MEDIAN_RAD else None}
            for n, j in enumerate(np.argsort(-size, kind="stable"))]  # fmt: skip


def implied_torque_scale(result: OpenLoopResult) -> dict[str, float | None]:
    """Joint -> the torque scale the delta's ``with`` replays imply (:mod:`asap_ros.export.implied_scale`)."""
    scores = [w.scores[WITH] for w in result.windows if w.scores[WITH].scale_sums is not None]
    sums = np.sum([s.scale_sums for s in scores], axis=0) if scores else np.zeros((2, len(result.joint_names)))
    scale = implied_scale.implied_scale(sums, sum(s.steps for s in scores))
    return implied_scale.to_dict(result.joint_names, scale)


def lag_scan(result: OpenLoopResult) -> dict:
    """Mean joint error over the first 0.25 s for actions shifted -1 / 0 / +1 steps, and the verdict."""
    errors = {lag: float(np.mean([w.lag_joint_error[lag] for w in result.windows])) for lag in LAGS}
    mpjpe = {lag: float(np.mean([w.lag_mpjpe[lag] for w in result.windows])) for lag in LAGS}
    best = min(errors, key=errors.__getitem__)
    margin = min(errors[lag] / errors[0] - 1.0 for lag in LAGS if lag) if errors[0] > 0 else float("inf")
    ok = best == 0 and margin >= LAG_MARGIN
    if ok:
        note = f"pairing ok: the recorded actions fit best, shifted by one step they are {margin:.0%} worse or more"
    elif best != 0:
        note = (f"the pairing is off: actions shifted by {best:+d} step(s) replay the recording better than the "
                "recorded pairing; check how the file pairs states and actions (docs/export.md)")  # fmt: skip
    else:
        note = (f"the pairing is doubtful: a one-step shift is only {margin:.0%} worse (under {LAG_MARGIN:.0%}); "
                "the actions barely drive the replay (too short or too static a recording?)")  # fmt: skip
    return {"horizon_s": LAG_HORIZON_S, "joint_error_rad": {str(k): v for k, v in errors.items()},
            "mpjpe_mm": {str(k): v for k, v in mpjpe.items()}, "best_lag": best, "margin": margin,
            "pairing_ok": ok, "note": note}  # fmt: skip


def delta_warning(result: OpenLoopResult, column: str = WITH) -> str | None:
    """A sentence when the delta makes the 0.25 s errors worse (E_g-mpjpe or E_mpjpe), else None."""
    worse = []
    for metric in ("g_mpjpe_mm", "mpjpe_mm"):
        change = relative_change(metric_values(result, WITHOUT, 0.25, metric), metric_values(result, column, 0.25, metric))
        if change.value > 0:
            worse.append(f"{METRIC_LABELS[metric]} {change.value:+.1%}")
    if not worse:
        return None
    return (f"WARNING: the delta makes the 0.25 s errors worse ({', '.join(worse)}): one step of it already pushes "
            "the simulator away from the recording; a delta that cannot help at 0.25 s will not be trusted further")


def to_dict(result: OpenLoopResult, floor: OpenLoopResult | None = None, floor_source: str | None = None) -> dict:
    """Every figure (the ``--json`` file); ``floor``: the same motions' nominal replays (``floor_source``
    says which), for the share of the closable gap (:mod:`asap_ros.export.closable_gap`)."""
    present = columns(result)
    horizons: dict[str, dict] = {}
    for horizon in HORIZONS_S:
        entry: dict[str, dict] = {}
        for metric in METRICS:
            values = {c: metric_values(result, c, horizon, metric) for c in present}
            figures = {c: mean_interval(v).to_dict() for c, v in values.items()}
            for c in present[1:]:
                figures[f"{c}_change"] = relative_change(values[WITHOUT], values[c]).to_dict()
            entry[metric] = figures
        horizons[f"{horizon:g}"] = entry
    per_joint = {f"{h:g}": {c: dict(zip(result.joint_names, joint_errors(result, c, h).mean(axis=0).tolist()))
                           for c in present} for h in HORIZONS_S}  # fmt: skip
    out = {
        "schema": SCHEMA,
        "simulator": result.simulator,
        "reset_velocity": result.reset_velocity,
        "targets": result.targets,
        "window_s": result.window_s,
        "stride_s": result.stride_s,
        "skip_start_s": result.skip_start_s,
        "windows": len(result.windows),
        "recordings": sorted({w.name for w in result.windows}),
        "motions": {m: sum(w.motion == m for w in result.windows) for m in sorted({w.motion for w in result.windows})},
        "horizons": horizons,
        "joint_error_rad": per_joint,
        "falls": {c: sum(w.scores[c].fell for w in result.windows) for c in present},
        "lag_scan": lag_scan(result),
        "clamped": None if result.clamps is None else {
            "rows": result.clamps.rows, "clamped_rows": result.clamps.clamped_rows,
            "share": result.clamps.clamped_rows / max(1, result.clamps.rows), "per_joint": result.clamps.per_joint},
        "skipped": result.skipped,
        "closable_gap": closable_gap.to_dict(closable_gap.closable_gap(result, floor), floor_source),
        "delta": None,
    }  # fmt: skip
    if WITH in present:
        out["delta"] = {
            "model": result.delta_model,
            "mean_abs_scaled_delta_rad": dict(zip(result.joint_names, delta_size(result).tolist())),
            "ranking": delta_ranking(result),
            "implied_torque_scale": implied_torque_scale(result),
            "warning": delta_warning(result),
            "physics_rate": None if PHYSICS_RATE not in present else {
                "mean_abs_scaled_delta_rad": dict(zip(result.joint_names, delta_size(result, PHYSICS_RATE).tolist()))},
            "finetune": None if FINETUNE not in present else {
                "mean_abs_delta_rad": dict(zip(result.joint_names, delta_size(result, FINETUNE).tolist())),
                "ranking": delta_ranking(result, FINETUNE)},
        }  # fmt: skip
    return out


def _cell(figure: dict, scale: float = 1.0) -> str:
    low, high = figure["ci95"]
    return f"{figure['value'] * scale:.2f} [{low * scale:.2f}, {high * scale:.2f}]"


def text_report(summary: dict, top: int = 5) -> str:
    """The console report of :func:`to_dict`'s figures."""
    present = [c for c in REPLAYS if c in summary["horizons"]["0.25"]["g_mpjpe_mm"]]
    titles = TITLES
    motions = ", ".join(f"{m} {n}" for m, n in summary["motions"].items())
    lines = [f"{summary['windows']} windows of {summary['window_s']:g} s every {summary['stride_s']:g} s ({motions}); "
             f"reset velocity: {summary['reset_velocity']}; targets: {summary['targets']} ({TARGETS_MEANING[summary['targets']]})",
             f"simulator: {summary['simulator']}", ""]  # fmt: skip
    header = "| horizon | metric | " + " | ".join(titles[c] + " (95% CI)" for c in present)
    header += "".join(f" | change {titles[c]}" for c in present[1:]) + " |"
    lines += [header, "|" + "---|" * (2 + len(present) + len(present) - 1)]
    for horizon, entry in summary["horizons"].items():
        for metric, figures in entry.items():
            cells = [_cell(figures[c]) for c in present] + [_cell(figures[f"{c}_change"], 100) + " %" for c in present[1:]]
            lines.append(f"| {horizon} s | {METRIC_LABELS[metric]} | " + " | ".join(cells) + " |")
    lines += [""] + closable_gap.text_lines(summary["closable_gap"])
    joint = summary["joint_error_rad"]["1"]
    worst = sorted(joint[WITHOUT], key=lambda j: -joint[WITHOUT][j])[:top]
    lines += ["", f"joints with the largest error at 1.0 s (mrad, {' / '.join(titles[c] for c in present)}):"]
    lines += [f"  {j:<28} " + " / ".join(f"{joint[c][j] * MRAD:7.1f}" for c in present) for j in worst]
    delta = summary["delta"]
    if delta is not None:
        size = "mean |0.25·Δa|" if summary["targets"] == TRAINER_TARGETS else "mean |change of the clipped target by Δa|"
        lines += ["", f"{size} per joint (mrad), largest first:"]
        lines += [f"  {r['rank']:>2} {r['joint']:<28} {r['mean_abs_rad'] * MRAD:7.2f}  " + (
                  f"{r['ratio_to_median']:5.1f}× median" if r["ratio_to_median"] is not None else "(median joint: 0)")
                  for r in delta["ranking"][:top]]  # fmt: skip
        lines += ["", "implied torque scale per joint (1 + Σ(0.25·Δa·u)/Σu², u the PD error), furthest from 100 % first:"]
        lines += implied_scale.scale_lines(delta["implied_torque_scale"], top)
        if delta["warning"]:
            lines += ["", delta["warning"]]
    scan = summary["lag_scan"]
    errors = ", ".join(f"{lag}: {v * MRAD:.1f}" for lag, v in scan["joint_error_rad"].items())
    lines += ["", f"lag scan (mean joint error over {scan['horizon_s']:g} s, mrad; action shift in steps) {errors}",
              f"  {scan['note']}"]  # fmt: skip
    clamped = summary["clamped"]
    if clamped is not None:
        who = "the trainer does not" if summary["targets"] == TRAINER_TARGETS else "so did this replay"
        lines.append(f"targets 0.25·a + default outside the joint limits (the robot clamped them, {who}): "
                     f"{clamped['clamped_rows']} of {clamped['rows']} rows ({clamped['share']:.0%})")  # fmt: skip
        for name, share in sorted(clamped["per_joint"].items(), key=lambda item: -item[1])[:top]:
            lines.append(f"  {name:<28} {share:.0%} of rows")
    falls = ", ".join(f"{titles[c]} {n}" for c, n in summary["falls"].items())
    lines.append(f"windows whose replay diverged past 0.5 m mean keypoint distance (fell): {falls} of {summary['windows']}")
    lines += [f"not replayed: {s}" for s in summary["skipped"]]
    return "\n".join(lines)


def write_json(summary: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return path


def write_png(result: OpenLoopResult, path: str | Path) -> Path:
    """Error against horizon (mean and 95% interval per replay) and per-joint bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    present = columns(result)
    colours = {WITHOUT: "tab:blue", WITH: "tab:green", PHYSICS_RATE: "tab:olive", FINETUNE: "tab:red"}
    labels = TITLES
    panels = 3 if WITH in present else 2
    fig, axes = plt.subplots(panels, 1, figsize=(10, 3.8 * panels))
    for metric, style in (("g_mpjpe_mm", "-o"), ("mpjpe_mm", "--s")):
        for c in present:
            stats = [mean_interval(metric_values(result, c, h, metric)) for h in HORIZONS_S]
            values = np.array([s.value for s in stats])
            spread = np.array([[s.value - s.low for s in stats], [s.high - s.value for s in stats]])
            axes[0].errorbar(HORIZONS_S, values, yerr=spread, fmt=style, color=colours[c], capsize=3,
                             label=f"{METRIC_LABELS[metric]}, {labels[c]}")  # fmt: skip
    axes[0].set_xlabel("horizon after the reset to the recorded state (s)")
    axes[0].set_ylabel("mm")
    axes[0].set_title(f"open-loop replay, {len(result.windows)} windows (95% intervals over windows)")
    axes[0].legend(fontsize=8)
    x = np.arange(len(result.joint_names))
    width = 0.8 / len(present)
    for n, c in enumerate(present):
        axes[1].bar(x + n * width, joint_errors(result, c, 1.0).mean(axis=0) * MRAD, width, color=colours[c],
                    label=labels[c])  # fmt: skip
    axes[1].set_ylabel("mean joint error over 1.0 s (mrad)")
    axes[1].set_xticks(x + 0.4 - width / 2, [n.replace("_joint", "") for n in result.joint_names], rotation=70, fontsize=7)
    axes[1].legend(fontsize=8)
    if panels == 3:
        axes[2].bar(x, delta_size(result) * MRAD, color=colours[WITH])
        axes[2].set_ylabel("mean |0.25·Δa| (mrad)")
        axes[2].set_xticks(x, [n.replace("_joint", "") for n in result.joint_names], rotation=70, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
