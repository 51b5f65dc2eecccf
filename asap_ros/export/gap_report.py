"""``asap-ros gap``: replay every episode of a bag, rank the joints, write plots and a Markdown report.

Output directory: ``report.md`` (read this first), ``gap.json`` (the numbers),
``divergence_by_joint.png``, ``error_growth.png`` and one ``<episode>.png`` per episode.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.core.errors import AsapError
from asap_ros.export.align import MOCAP_FILTER_MS, align_episode
from asap_ros.export.bag import SessionBag
from asap_ros.export.gap import (
    DEFAULT_WINDOW_S,
    RANK_HORIZON_S,
    STANDS_OUT_MIN_RAD,
    STANDS_OUT_RATIO,
    TRIM_SHARE,
    EpisodeGap,
    JointDivergence,
    OpenLoopReplayer,
    WindowReplay,
    episode_windows,
    rank_joints,
    replayed_ticks,
)
from asap_ros.export.progress import Progress
from asap_ros.recording import topics

MRAD = 1000.0
TOP_JOINTS = 4
GROWTH_BIN_S = 0.02


@dataclass(frozen=True)
class BagGap:
    """The replay of every episode of one bag."""

    bag: str
    simulator: str
    window_s: float
    rank_horizon_s: float
    skip_start_s: float
    """Seconds at the start of each episode not replayed."""
    joint_names: tuple[str, ...]
    episodes: tuple[EpisodeGap, ...]
    skipped: tuple[str, ...]
    """Episodes that could not be replayed, each with the reason."""

    @property
    def windows(self) -> list[WindowReplay]:
        return [w for e in self.episodes for w in e.windows]

    def ranking(self) -> list[JointDivergence]:
        """All episodes pooled."""
        return rank_joints([w for e in self.episodes for w in e.early], self.windows, self.joint_names,
                           self.rank_horizon_s)  # fmt: skip

    def growth(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean absolute divergence (S, 29) against time since the reset (S,), in 20 ms bins."""
        times = np.concatenate([w.times_s for w in self.windows])
        errors = np.abs(np.concatenate([w.error for w in self.windows]))
        bins = np.floor(times / GROWTH_BIN_S).astype(int)
        used = np.unique(bins)
        means = np.array([errors[bins == b].mean(axis=0) for b in used])
        return (used + 0.5) * GROWTH_BIN_S, means

    def to_dict(self) -> dict:
        def table(rows: list[JointDivergence]) -> list[dict]:
            return [{**vars(r), "stands_out": r.stands_out} for r in rows]

        return {
            "bag": self.bag,
            "simulator": self.simulator,
            "window_s": self.window_s,
            "rank_horizon_s": self.rank_horizon_s,
            "skip_start_s": self.skip_start_s,
            "windows": len(self.windows),
            "rank_resets": sum(len(e.early) for e in self.episodes),
            "mocap_velocity_resets": sum(w.velocity_source == "mocap" for w in self.windows),
            "ranking": table(self.ranking()),
            "episodes": [
                {"episode": e.name, "outcome": e.outcome, "cut_short": e.cut_short, "windows": len(e.windows),
                 "rank_resets": len(e.early), "ranking": table(e.ranking(self.joint_names, self.rank_horizon_s))}  # fmt: skip
                for e in self.episodes
            ],
            "skipped": list(self.skipped),
        }


def bag_gap(
    bag_path: str | Path,
    window_s: float = DEFAULT_WINDOW_S,
    episodes: Sequence[int] | None = None,
    mocap_topic: str = topics.MOCAP_POSE,
    mocap_filter_ms: float = MOCAP_FILTER_MS,
    sim_config: str | None = None,
    progress: bool | None = None,
    rank_horizon_s: float = RANK_HORIZON_S,
    skip_start_s: float = 0.0,
) -> BagGap:
    """Replay the episodes of one bag in the nominal simulator."""
    replayer = OpenLoopReplayer(sim_config)
    skipped, aligned = [], []
    with SessionBag(bag_path, mocap_topic) as bag:
        for marker, episode in bag.iter_episodes(episodes):
            try:
                aligned.append(align_episode(episode, int(mocap_filter_ms * 1e6)))
            except AsapError as exc:
                skipped.append(f"episode {marker.index} ({marker.motion}): {exc}")
        name = str(bag.path)
    total = sum(len(episode_windows(ticks, window_s)) + len(episode_windows(ticks, rank_horizon_s))
                for ticks in (replayed_ticks(a.time_ns, skip_start_s) for a in aligned))  # fmt: skip
    results = []
    with Progress(total, f"gap {Path(name).name}", "windows", enabled=progress) as bar:
        for a in aligned:
            results.append(replayer.replay_episode(a, window_s, skip_start_s, on_window=bar.advance,
                                                   rank_horizon_s=rank_horizon_s))  # fmt: skip
    if not results:
        raise AsapError(f"{name}: no episode could be replayed: {'; '.join(skipped) or 'the bag holds none'}")
    return BagGap(name, replayer.description, window_s, rank_horizon_s, skip_start_s, replayer.robot.joint_names,
                  tuple(results), tuple(skipped))  # fmt: skip


# --- report -----------------------------------------------------------------------------------


def ranking_table(rows: list[JointDivergence], horizon_s: float, limit: int | None = None) -> str:
    """Markdown table of a ranking."""
    lines = [
        f"| rank | joint | trimmed RMS divergence, first {horizon_s:g} s (mrad) | × median joint | stands out "
        "| RMS divergence, whole window (mrad) | end-of-window error (mrad) |",
        "|---:|---|---:|---:|:---:|---:|---:|",
    ]
    for r in rows[:limit]:
        lines.append(
            f"| {r.rank} | {r.joint} | {r.early_rms_rad * MRAD:.2f} | {r.ratio_to_median:.1f} | "
            f"{'**yes**' if r.stands_out else ''} | {r.window_rms_rad * MRAD:.2f} | {r.end_error_rad * MRAD:.2f} |"
        )
    return "\n".join(lines)


def verdict(rows: list[JointDivergence]) -> str:
    """One sentence: which joints stand out, or that none does."""
    standing = [r.joint for r in rows if r.stands_out]
    if standing:
        return (f"**{', '.join(standing)}** diverge more than {STANDS_OUT_RATIO:g}× the median joint (and over "
                f"{STANDS_OUT_MIN_RAD * MRAD:g} mrad): the nominal "
                "model misses something about them (torque, friction, delay, mass); a delta-action model will "
                "mostly have to correct these.")  # fmt: skip
    return (f"No joint stands out: the largest divergence is {rows[0].ratio_to_median:.1f}× the median joint "
            f"({rows[0].joint}, {rows[0].early_rms_rad * MRAD:.2f} mrad RMS).")  # fmt: skip


def _plots(gap: BagGap, out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    rows = gap.ranking()
    fig, ax = plt.subplots(figsize=(8, 8))
    ax.barh([r.joint for r in rows][::-1], [r.early_rms_rad * MRAD for r in rows][::-1],
            color=["tab:red" if r.stands_out else "tab:blue" for r in rows][::-1])  # fmt: skip
    ax.set_xlabel(f"RMS divergence within {gap.rank_horizon_s:g} s of each reset, replay vs recording (mrad)")
    ax.set_title(f"Open-loop replay in the nominal simulator, {gap.window_s:g} s windows")
    fig.tight_layout()
    fig.savefig(out / "divergence_by_joint.png", dpi=100)
    plt.close(fig)
    files.append("divergence_by_joint.png")

    times, means = gap.growth()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in rows[:TOP_JOINTS]:
        ax.plot(times, means[:, gap.joint_names.index(r.joint)] * MRAD, label=r.joint)
    ax.plot(times, np.median(means, axis=1) * MRAD, "k--", label="median joint")
    ax.set_xlabel("time since reset to the recorded state (s)")
    ax.set_ylabel("mean |divergence| (mrad)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "error_growth.png", dpi=100)
    plt.close(fig)
    files.append("error_growth.png")

    for episode in gap.episodes:
        top = episode.ranking(gap.joint_names, gap.rank_horizon_s)[:TOP_JOINTS]
        fig, axes = plt.subplots(len(top), 1, figsize=(9, 2.2 * len(top)), sharex=True)
        origin = episode.windows[0].start_ns
        for ax, r in zip(np.atleast_1d(axes), top):
            j = gap.joint_names.index(r.joint)
            for n, w in enumerate(episode.windows):
                t = (w.start_ns - origin) / 1e9 + w.times_s
                ax.plot(t, w.recorded_q[:, j], "k", lw=1, label="recorded" if n == 0 else None)
                ax.plot(t, w.simulated_q[:, j], "tab:red", lw=1, label="replayed (nominal)" if n == 0 else None)
                ax.axvline((w.start_ns - origin) / 1e9, color="0.8", lw=0.5)
            ax.set_ylabel(f"{r.joint}\n(rad)", fontsize=8)
        np.atleast_1d(axes)[0].legend(fontsize=8)
        np.atleast_1d(axes)[-1].set_xlabel("time in episode (s); grey lines: resets")
        fig.tight_layout()
        fig.savefig(out / f"{episode.name}.png", dpi=100)
        plt.close(fig)
        files.append(f"{episode.name}.png")
    return files


def write_gap_report(gap: BagGap, out_dir: str | Path) -> Path:
    """``report.md``, ``gap.json`` and the PNG plots in ``out_dir``; returns the report path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _plots(gap, out)
    (out / "gap.json").write_text(json.dumps(gap.to_dict(), indent=2) + "\n", encoding="utf-8")
    rows = gap.ranking()
    windows = gap.windows
    seconds = sum(w.times_s[-1] for w in windows)
    from_mocap = sum(w.velocity_source == "mocap" for w in windows)
    lines = [
        f"# Sim-to-real gap: `{Path(gap.bag).name}`",
        "",
        f"Each episode's recorded LowCmds were replayed open-loop in the **nominal** simulator ({gap.simulator}), "
        f"in windows of {gap.window_s:g} s. At each window start the simulated G1 is reset to the recorded state: "
        "pelvis pose from mocap, angular velocity from the IMU gyroscope, linear velocity keeping the standing foot "
        "still (leg odometry; mocap's when no foot is within 3 mm of the floor), joint angles and velocities from "
        "the LowState. The recorded commands then drive it through the simulator's PD motor model. Divergence = "
        "simulated minus recorded joint angle at every recorded LowState.",
        "",
        f"{len(gap.episodes)} episode(s), {len(windows)} windows ({from_mocap} reset with the mocap velocity), "
        f"{seconds:.1f} s replayed" + (f" (the first {gap.skip_start_s:g} s of each episode left out)."
                                       if gap.skip_start_s else "."),
        "",
        f"Joints are ranked by their divergence within the first {gap.rank_horizon_s:g} s after a reset, from "
        f"{sum(len(e.early) for e in gap.episodes)} resets {gap.rank_horizon_s:g} s apart (every part of the "
        f"episode, each replayed that long), each joint's worst {TRIM_SHARE:.0%} of them left out (a foot landing "
        "or pushing off makes one or two resets diverge whatever the model): an open-loop humanoid drifts out of "
        "balance, and later in a window every joint diverges with the whole body (the last two columns, and the "
        "growth plot, show that part).",
        "",
        "## Joints ranked by divergence (all episodes)",
        "",
        verdict(rows),
        "",
        ranking_table(rows, gap.rank_horizon_s),
        "",
        "![divergence by joint](divergence_by_joint.png)",
        "",
        "![divergence growth after a reset](error_growth.png)",
        "",
        "## Episodes",
    ]
    for episode in gap.episodes:
        flag = f" — **cut short** ({episode.outcome})" if episode.cut_short else ""
        lines += [
            "",
            f"### {episode.name}{flag}",
            "",
            ranking_table(episode.ranking(gap.joint_names, gap.rank_horizon_s), gap.rank_horizon_s,
                          limit=5),  # fmt: skip
            "",
            f"![{episode.name}]({episode.name}.png)",
        ]
    if gap.skipped:
        lines += ["", "## Not replayed", ""] + [f"- {s}" for s in gap.skipped]
    lines += [
        "",
        "## Reading this before training a delta-action model",
        "",
        "- A joint far above the median is where the real robot differs from the simulator; expect the delta "
        "model's corrections to concentrate there, and check its hardware first (torque, friction, temperature).",
        "- Divergence that grows steadily with time since the reset points at a force error (torque scale, "
        "friction, mass); a constant offset from the first samples at a delay or a sensor offset.",
        "- Uniformly small divergence (no joint standing out) means the nominal simulator already explains the "
        "recording; a delta model has little to learn from it.",
        "- Cut-short episodes (e-stop, fault) are replayed up to their end; their last window can hold the fall "
        "or the fault itself.",
    ]
    report = out / "report.md"
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return report
