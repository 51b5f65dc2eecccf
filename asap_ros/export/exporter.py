"""``asap-ros export``: every episode of a bag into the chosen formats, plus a sidecar per episode.

Files per episode, named ``<bag>_ep<NNN>_<motion>`` (dots replaced by ``_``: ASAP's directory
loader keys a file by its name cut at the first dot): ``.pkl`` (asap), ``.npz`` (npz),
``.delta.npz`` (delta) and ``.meta.json`` (where it came from, how it ended, the root-pose
source, the synchronisation errors, the joint-limit clamps of the executed targets, notes).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.export.actions import ClampCounts, PolicyFacts, clamp_counts
from asap_ros.export.align import ROOT_FROM_IMU, AlignedEpisode, align_episode
from asap_ros.export.asap_clip import write_asap_clip
from asap_ros.export.bag import SessionBag
from asap_ros.export.clips import resolve_clip, resolve_spec
from asap_ros.export.delta import write_delta
from asap_ros.export.episode import RecordedEpisode
from asap_ros.export.formats import RAW, ExportContext, load_context
from asap_ros.export.npz_log import write_npz_log
from asap_ros.export.pairing import transitions
from asap_ros.export.progress import Progress
from asap_ros.recording import topics

Writer = Callable[[AlignedEpisode, Path, ExportContext], Path]
WRITERS: dict[str, Writer] = {"asap": write_asap_clip, "npz": write_npz_log, "delta": write_delta}
META_SUFFIX = ".meta.json"


@dataclass
class ExportedEpisode:
    """What was exported for one episode (also the ``.meta.json`` content)."""

    bag: str
    episode: int
    motion: str
    clip: str
    outcome: str
    cut_short: bool
    estop: bool
    actor_steps: int
    first_tick: int
    last_tick: int
    root_source: str
    mocap_filter_ms: float
    sync: dict
    action: str = RAW
    """What fills the ``action`` key (``raw`` or ``executed``)."""
    clamped: dict = field(default_factory=dict)
    """:meth:`ClampCounts.to_dict` of the executed actor steps."""
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def episode_notes(aligned: AlignedEpisode) -> list[str]:
    """Plain-language warnings a trainer should see."""
    episode, notes = aligned.episode, list(aligned.episode.notes)
    faulted = np.flatnonzero(episode.steps.fault_latched)
    if len(faulted):
        notes.append(f"a fault latched on tick {int(aligned.tick[faulted[0]])}: its action and damping command are in "
                     "no asap or delta row; the transition into its state is flagged terminate")  # fmt: skip
    if episode.cut_short:
        notes.append(f"cut short: {episode.outcome} (phase reached {aligned.phase[-1]:.3f})")
    if aligned.root_source == ROOT_FROM_IMU:
        notes.append(
            f"no mocap on {episode.mocap_topic}: root orientation and angular velocity are the robot's IMU "
            "estimate; root position and linear velocity are unavailable (NaN)"
        )
    if aligned.sync.missing_ticks:
        left_out = transitions(aligned, continuous=True).left_out
        notes.append(f"{aligned.sync.missing_ticks} actor ticks missing (no policy step recorded); the asap clip "
                     f"stops at the first one (its rows are frames at the control rate): {left_out} steps left out")
    return notes


def export_stem(bag_name: str, episode_name: str) -> str:
    """``<bag>_<episode>`` without dots (ASAP's directory loader keys a file by its name up to the first dot)."""
    return f"{bag_name}_{episode_name}".replace(".", "_")


def executed_clamps(aligned: AlignedEpisode, ctx: ExportContext) -> ClampCounts:
    """Joint-limit clamps of the targets of every executed actor step (a faulted one sent damping)."""
    executed = ~aligned.episode.steps.fault_latched
    names = tuple(ctx.robot.joint_names[i] for i in ctx.facts.driven)
    return clamp_counts(aligned.raw_action[executed], aligned.q_target[executed], ctx.facts, names)


def export_bag(
    bag_path: str | Path,
    out_dir: str | Path,
    formats: Sequence[str],
    episodes: Sequence[int] | None = None,
    clip: str | Path | None = None,
    mocap_topic: str = topics.MOCAP_POSE,
    mocap_filter_ms: float = 0.0,
    ctx: ExportContext | None = None,
    progress: bool | None = None,
    action: str = RAW,
) -> list[ExportedEpisode]:
    """Export the episodes of one bag (``episodes``: their indices, default all).

    ``progress``: draw a progress bar on stderr (default: when it is a terminal). ``action``:
    ``raw`` (the actor's output, ASAP's convention) or ``executed`` (the raw-equivalent of the
    clamped target the robot got) fills the ``action`` key.
    """
    unknown = [f for f in formats if f not in WRITERS]
    if unknown or not formats:
        raise ConfigError(None, "--format", f"must be one of {', '.join(WRITERS)}", unknown or formats)
    ctx = dataclasses.replace(ctx or load_context(), action=action)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    exported = []
    with SessionBag(bag_path, mocap_topic) as bag:
        count = len(episodes) if episodes else len(bag.episodes())
        bar = Progress(count, f"export {bag.path.name}", "episodes", enabled=progress)
        for episode, aligned, episode_ctx, clip_path in aligned_episodes(bag, ctx, episodes, clip, mocap_filter_ms):
            stem = out / export_stem(bag.path.name, episode.name)
            record = ExportedEpisode(
                bag=str(bag.path), episode=episode.index, motion=episode.motion, clip=str(clip_path),
                outcome=episode.outcome, cut_short=episode.cut_short, estop=episode.estop,
                actor_steps=len(aligned), first_tick=int(aligned.tick[0]), last_tick=int(aligned.tick[-1]),
                root_source=aligned.root_source, mocap_filter_ms=mocap_filter_ms, sync=aligned.sync.to_dict(),
                action=action, clamped=executed_clamps(aligned, episode_ctx).to_dict(), notes=episode_notes(aligned),
            )  # fmt: skip
            for name in formats:
                record.files.append(str(WRITERS[name](aligned, stem, episode_ctx)))
            meta = stem.with_name(stem.name + META_SUFFIX)
            meta.write_text(json.dumps(record.to_dict(), indent=2) + "\n", encoding="utf-8")
            exported.append(record)
            bar.advance()
        bar.close()
    return exported


def aligned_episodes(bag: SessionBag, ctx: ExportContext, episodes: Sequence[int] | None = None,
                     clip: str | Path | None = None, mocap_filter_ms: float = 0.0,
                     ) -> Iterator[tuple[RecordedEpisode, AlignedEpisode, ExportContext, Path]]:  # fmt: skip
    """Each wanted episode of an open bag on its control ticks, with its policy facts set in the
    context and the clip it tracked (errors: no episode, an unknown one, no clip or spec)."""
    session = bag.session_info()
    clip_of = functools.cache(lambda motion: resolve_clip(motion, session, bag.path, clip))
    facts_of = functools.cache(
        lambda motion: PolicyFacts.of_spec(resolve_spec(motion, session, bag.path, ctx.robot)))
    _check_wanted(bag.path, bag.episodes(), episodes)
    for marker, episode in bag.iter_episodes(episodes):
        clip_path = clip_of(marker.motion)
        episode_ctx = dataclasses.replace(ctx, policy=facts_of(marker.motion))
        yield episode, align_episode(episode, int(mocap_filter_ms * 1e6)), episode_ctx, clip_path


def _check_wanted(bag: Path, markers: list, wanted: Sequence[int] | None) -> None:
    if not markers:
        raise ConfigError(bag, topics.EPISODE, "the bag holds no episode (no motion was tracked)")
    known = [m.index for m in markers]
    missing = [i for i in (wanted or []) if i not in known]
    if missing:
        raise ConfigError(bag, "--episode", f"no such episode (episodes: {', '.join(map(str, known))})", missing)
