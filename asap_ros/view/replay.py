"""``asap-ros view BAG``: a recorded session on the same page, with a timeline and plots.

The bag is read once (:func:`load_session`): every policy step (commanded positions, raw
actions, latency), the LowStates the actor used plus a 100 Hz subset of the rest (pose and
temperatures), mocap, transitions, episodes and the recorder's status. The page then shows
the moment the timeline points at; the plots show the episode under the cursor (commanded
vs measured position of one joint, its raw action, the tracking error against the clip).
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from asap_ros.config.clip import MotionClip, load_clip
from asap_ros.core.errors import ConfigError
from asap_ros.core.state import NUM_MOTORS
from asap_ros.recording import topics
from asap_ros.recording.episodes import Episode
from asap_ros.tracking.kinematics import DRIVEN_MOTORS, sample_clip
from asap_ros.view.reference import ReferencePoser
from asap_ros.view.snapshot import NO_VALUE, BodyPose, Snapshot, timing_of

POSE_RATE_HZ = 100.0
"""LowStates kept for the timeline besides the ones the actor used."""
MOCAP_MATCH_NS = 100_000_000
"""A mocap sample farther than this from the cursor is not used for the root."""
TIMING_WINDOW_S = 10.0
"""Loop timing shown: the policy steps of the last this many seconds before the cursor."""
PLOT_WINDOW_S = 5.0
"""Outside an episode the plot shows this much on each side of the cursor."""
TIMELINE_STEP_S = 0.02
PLOTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "position": ("commanded vs measured (rad)", ("commanded", "measured")),
    "action": ("raw action", ("raw action",)),
    "error": ("tracking error |q - clip| (rad)", ("selected joint", "mean of the 23 driven")),
}
"""Plot -> (title, series)."""
MAX_LABELLED_MARKS = 12


@dataclass(frozen=True)
class StepTable:
    """Every policy step of the session (K rows, in time order)."""

    stamp_ns: np.ndarray
    episode: np.ndarray
    motion_tick: np.ndarray
    phase: np.ndarray
    q_target: np.ndarray
    """(K, 29)"""
    raw_action: np.ndarray
    """(K, 23), NaN where the actor did not run."""
    q_measured: np.ndarray
    """(K, 29) the LowState the step was computed from (NaN if it is not in the bag)."""
    latency_ns: np.ndarray
    late: np.ndarray


@dataclass(frozen=True)
class RecordedSession:
    path: Path
    start_ns: int
    end_ns: int
    steps: StepTable
    pose_stamp_ns: np.ndarray
    q: np.ndarray
    quat_wxyz: np.ndarray
    temperature_c: np.ndarray
    mocap_stamp_ns: np.ndarray
    mocap_pos: np.ndarray
    mocap_quat_wxyz: np.ndarray
    transitions: list[Any]
    """Deserialised ``ModeTransition`` messages in time order."""
    episodes: list[Episode]
    recorder: list[tuple[int, str]]
    """(log time, the recorder's diagnostics message)."""
    clips: dict[str, MotionClip]

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9

    def mode_at(self, stamp_ns: int) -> tuple[str, str, str]:
        """(mode, motion, fault reason) after the last transition at or before ``stamp_ns``."""
        stamps = [int(t.stamp_ns) for t in self.transitions]
        i = bisect.bisect_right(stamps, stamp_ns) - 1
        if i < 0:
            return (self.transitions[0].from_mode if self.transitions else NO_VALUE), "", ""
        t = self.transitions[i]
        return t.to_mode, t.motion if t.to_mode == "TRACKING" else "", t.reason if t.to_mode == "DAMPING" else ""

    def episode_at(self, stamp_ns: int) -> Episode | None:
        return next((e for e in self.episodes if e.start_ns <= stamp_ns <= e.end_ns), None)


def _nearest(stamps: np.ndarray, target: int) -> int:
    i = int(np.searchsorted(stamps, target))
    if i == len(stamps) or (i > 0 and target - stamps[i - 1] <= stamps[i] - target):
        i -= 1
    return i


def _steps(bag: Any, lowstate_tick: np.ndarray, lowstate_q: np.ndarray) -> StepTable:
    stamps, raws = bag.raw(topics.POLICY_STEP)
    if len(raws) == 0:
        raise ConfigError(bag.path, topics.POLICY_STEP, "no policy steps in the bag: nothing to show")
    cols = bag.columns(topics.POLICY_STEP, raws, ["stamp_ns", "episode", "motion_tick", "phase", "q_target",
                                                  "latency_ns", "late", "lowstate_tick"])  # fmt: skip
    order = np.argsort(cols["stamp_ns"], kind="stable")
    cols = {k: v[order] for k, v in cols.items()}
    tracking = np.flatnonzero(cols["motion_tick"] >= 0)
    raw_action = np.full((len(order), len(DRIVEN_MOTORS)), np.nan)
    if len(tracking):
        actions = bag.columns(topics.POLICY_STEP, raws.take(order[tracking]), ["raw_action"])["raw_action"]
        raw_action[tracking, : actions.shape[1]] = actions
    by_tick = np.argsort(lowstate_tick, kind="stable")
    where = np.clip(np.searchsorted(lowstate_tick[by_tick], cols["lowstate_tick"]), 0, max(len(by_tick) - 1, 0))
    found = lowstate_tick[by_tick][where] == cols["lowstate_tick"] if len(by_tick) else np.zeros(len(order), bool)
    q_measured = np.full((len(order), NUM_MOTORS), np.nan)
    q_measured[found] = lowstate_q[by_tick[where[found]]]
    return StepTable(
        stamp_ns=cols["stamp_ns"].astype(np.int64), episode=cols["episode"].astype(np.int64),
        motion_tick=cols["motion_tick"].astype(np.int64), phase=cols["phase"].astype(np.float64),
        q_target=cols["q_target"].astype(np.float64), raw_action=raw_action, q_measured=q_measured,
        latency_ns=cols["latency_ns"].astype(np.int64), late=cols["late"].astype(bool),
    )  # fmt: skip


def _session_clips(info: dict, assets_dir: str | None) -> dict[str, MotionClip]:
    """The clips the session's policies tracked, from the files the session names (where they
    are on this machine), else from the package's spec of the same name."""
    from asap_ros.config.paths import policies_dir
    from asap_ros.view.reference import clips_of_policies

    clips: dict[str, MotionClip] = {}
    for policy in info.get("policies", []):
        clip_file = Path(policy.get("clip_file", ""))
        if clip_file.is_file():
            clips[policy["name"]] = load_clip(clip_file)
        elif (policies_dir() / f"{policy['name']}.yaml").is_file():
            clips.update(clips_of_policies([policies_dir() / f"{policy['name']}.yaml"], assets_dir))
    return clips


def _recorder_status(bag: Any) -> list[tuple[int, str]]:
    if not bag.has_topic(topics.DIAGNOSTICS):
        return []
    stamps, raws = bag.raw(topics.DIAGNOSTICS)
    out = []
    for i, stamp in enumerate(stamps):
        msg = bag.typestore.deserialize_cdr(raws[i], "diagnostic_msgs/msg/DiagnosticArray")
        out += [(int(stamp), s.message) for s in msg.status if s.name == "asap_recorder"]
    return out


def load_session(path: str | Path, assets_dir: str | None = None) -> RecordedSession:
    """Everything the replay shows, from the bag at ``path`` (a ``ConfigError`` names what is missing)."""
    from asap_ros.export.bag import SessionBag

    bag = SessionBag(path)
    stamps, raws = bag.raw(topics.LOWSTATE)
    if len(raws) == 0:
        raise ConfigError(bag.path, topics.LOWSTATE, "no LowState in the bag: nothing to show")
    ticks = bag.columns(topics.LOWSTATE, raws, ["tick"])["tick"].astype(np.int64)
    span_s = max((stamps[-1] - stamps[0]) / 1e9, 1e-3)
    keep = np.unique(np.linspace(0, len(raws) - 1, int(span_s * POSE_RATE_HZ) + 1).astype(np.int64))
    step_ticks = bag.columns(topics.POLICY_STEP, bag.raw(topics.POLICY_STEP)[1], ["lowstate_tick"])["lowstate_tick"]
    keep = np.union1d(keep, np.flatnonzero(np.isin(ticks, step_ticks)))
    cols = bag.columns(topics.LOWSTATE, raws.take(keep), ["motor_state.q", "motor_state.temperature", "imu_state.quaternion"])
    q = cols["motor_state.q"][:, :NUM_MOTORS].astype(np.float64)
    steps = _steps(bag, ticks[keep], q)
    stream = bag.mocap()
    mocap = (stream.stamps_ns, stream["pos"], stream["quat_wxyz"]) if stream is not None else (
        np.empty(0, np.int64), np.empty((0, 3)), np.empty((0, 4)))
    return RecordedSession(
        path=bag.path, start_ns=int(min(stamps[0], steps.stamp_ns[0])), end_ns=int(max(stamps[-1], steps.stamp_ns[-1])),
        steps=steps, pose_stamp_ns=stamps[keep].astype(np.int64), q=q,
        quat_wxyz=cols["imu_state.quaternion"].astype(np.float64),
        temperature_c=cols["motor_state.temperature"][:, :NUM_MOTORS].max(axis=2).astype(np.float64),
        mocap_stamp_ns=mocap[0], mocap_pos=mocap[1], mocap_quat_wxyz=mocap[2],
        transitions=bag.transitions(), episodes=bag.episodes(), recorder=_recorder_status(bag),
        clips=_session_clips(bag.session_info(), assets_dir),
    )  # fmt: skip


class SessionMoments:
    """Snapshots and plot data of a recorded session at any time of it."""

    def __init__(self, session: RecordedSession) -> None:
        self.session = session
        self.poser = ReferencePoser(session.clips)
        steps = session.steps
        for episode in session.episodes:
            first = np.flatnonzero((steps.stamp_ns >= episode.start_ns) & (steps.motion_tick >= 0))
            if len(first):
                self.poser.align(int(steps.episode[first[0]]), episode.motion, self.robot_at(int(steps.stamp_ns[first[0]]))[0])
        self.q_reference = self._reference_angles()

    def _reference_angles(self) -> np.ndarray:
        """(K, 23) the clip's joint angles at each tracking step (NaN elsewhere)."""
        steps, out = self.session.steps, np.full((len(self.session.steps.stamp_ns), len(DRIVEN_MOTORS)), np.nan)
        for episode in self.session.episodes:
            clip = self.session.clips.get(episode.motion)
            rows = np.flatnonzero((steps.stamp_ns >= episode.start_ns) & (steps.stamp_ns <= episode.end_ns)
                                  & (steps.motion_tick >= 0))  # fmt: skip
            if clip is not None and len(rows):
                out[rows] = sample_clip(clip, np.clip(steps.phase[rows], 0.0, 1.0) * clip.duration_s).dof
        return out

    def robot_at(self, stamp_ns: int) -> tuple[BodyPose, str]:
        from asap_ros.config.robot_description import root_pose

        s, mocap = self.session, None
        i = _nearest(s.pose_stamp_ns, stamp_ns)
        if len(s.mocap_stamp_ns):
            m = _nearest(s.mocap_stamp_ns, stamp_ns)
            if abs(int(s.mocap_stamp_ns[m]) - stamp_ns) <= MOCAP_MATCH_NS:
                mocap = (s.mocap_pos[m], s.mocap_quat_wxyz[m])
        position, quat, source = root_pose(mocap, s.quat_wxyz[i])
        return BodyPose(position, quat, s.q[i]), source

    def snapshot(self, t_s: float) -> Snapshot:
        s, steps = self.session, self.session.steps
        stamp_ns = s.start_ns + int(round(t_s * 1e9))
        robot, root_source = self.robot_at(stamp_ns)
        mode, motion, fault = s.mode_at(stamp_ns)
        k = max(int(np.searchsorted(steps.stamp_ns, stamp_ns, side="right")) - 1, 0)
        tracking = steps.motion_tick[k] >= 0 and bool(motion)
        phase = float(steps.phase[k]) if tracking else None
        episode = int(steps.episode[k])
        reference = self.poser.pose(episode, motion, phase) if tracking else None
        window = (steps.stamp_ns > stamp_ns - TIMING_WINDOW_S * 1e9) & (steps.stamp_ns <= stamp_ns) & (steps.latency_ns > 0)
        recorder = [text for log_ns, text in s.recorder if log_ns <= stamp_ns]
        marker = s.episode_at(stamp_ns)
        return Snapshot(
            robot=robot, root_source=root_source, reference=reference, mode=mode, fault=fault, motion=motion,
            episode=marker.index if marker is not None else 0, phase=phase,
            temperature_c=s.temperature_c[_nearest(s.pose_stamp_ns, stamp_ns)],
            timing=timing_of(steps.latency_ns[window], steps.late[window]) if window.any() else None,
            recorder=recorder[-1] if recorder else NO_VALUE, clock=f"t = {t_s:.2f} s of {s.duration_s:.2f} s",
        )  # fmt: skip

    def plot_rows(self, t_s: float) -> tuple[np.ndarray, str]:
        """Step rows the plots show at ``t_s`` (the episode under it, else a window) and a title."""
        s, steps = self.session, self.session.steps
        stamp_ns = s.start_ns + int(round(t_s * 1e9))
        marker = s.episode_at(stamp_ns)
        if marker is not None:
            rows = np.flatnonzero((steps.stamp_ns >= marker.start_ns) & (steps.stamp_ns <= marker.end_ns))
            return rows, f"episode {marker.index}: {marker.motion}"
        rows = np.flatnonzero(np.abs(steps.stamp_ns - stamp_ns) <= PLOT_WINDOW_S * 1e9)
        return rows, f"±{PLOT_WINDOW_S:g} s (no episode here)"


class ReplayView:
    """The timeline, episode jump, joint choice and plots on a :class:`~asap_ros.view.page.ViewPage`."""

    def __init__(self, page: Any, session: RecordedSession, joint_names: tuple[str, ...]) -> None:
        from viser import uplot

        self._uplot = uplot
        self.page, self.moments, self.joint_names = page, SessionMoments(session), joint_names
        gui = page.server.gui
        duration = round(max(session.duration_s, TIMELINE_STEP_S), 2)
        episodes = session.episodes
        labelled = len(episodes) <= MAX_LABELLED_MARKS
        starts = [round((e.start_ns - session.start_ns) / 1e9, 2) for e in episodes]
        labels = [f"E{e.index}" if labelled else "" for e in episodes]
        marks = ((0.0, "0 s"), *zip(starts, labels), (duration, f"{duration:.1f} s"))
        with gui.add_folder("Timeline", order=-1):
            self.timeline = gui.add_slider("time (s)", 0.0, duration, TIMELINE_STEP_S, 0.0, marks=marks)
            self.playing = gui.add_checkbox("play", False)
            options = ["—"] + [f"{e.index}: {e.motion} ({'complete' if e.complete else 'cut'}, "
                               f"{'e-stop' if e.estop else e.end_mode or 'recording ended'})" for e in episodes]  # fmt: skip
            self.episode_choice = gui.add_dropdown("go to episode", options, "—")
        with gui.add_folder("Plots", order=10):
            self.joint_choice = gui.add_dropdown("joint", list(joint_names), joint_names[0])
            self._plots = {name: self._new_plot(title, series) for name, (title, series) in PLOTS.items()}
        self._lock = threading.Lock()
        self.timeline.on_update(lambda _: self.show())
        self.joint_choice.on_update(lambda _: self.show())
        self.episode_choice.on_update(lambda _: self._go_to_episode())
        self.playing.on_update(lambda _: self._start_playing() if self.playing.value else None)
        self.show()

    def _new_plot(self, title: str, names: tuple[str, ...]) -> Any:
        uplot, gui = self._uplot, self.page.server.gui
        colors = ("#d9480f", "#1971c2", "#2f9e44")
        series = (uplot.Series(label="t (s)"),
                  *(uplot.Series(label=n, stroke=c, width=2) for n, c in zip(names, colors)),
                  uplot.Series(label="cursor", stroke="#000000", width=0, points={"show": True, "size": 9}))  # fmt: skip
        empty = tuple(np.zeros(2) for _ in series)
        return gui.add_uplot(empty, series, title=title, aspect=2.0)

    def _go_to_episode(self) -> None:
        choice = self.episode_choice.value
        if choice == "—":
            return
        index = int(choice.split(":")[0])
        episode = next(e for e in self.moments.session.episodes if e.index == index)
        self.timeline.value = round((episode.start_ns - self.moments.session.start_ns) / 1e9 + TIMELINE_STEP_S, 2)

    def _start_playing(self) -> None:
        def play() -> None:
            last = time.monotonic()
            while self.playing.value and self.timeline.value < self.timeline.max:
                time.sleep(1.0 / 15)
                now = time.monotonic()
                self.timeline.value = round(min(self.timeline.max, self.timeline.value + (now - last)), 2)
                last = now
            self.playing.value = False

        threading.Thread(target=play, name="replay-play", daemon=True).start()

    def show(self) -> None:
        with self._lock:
            t_s = float(self.timeline.value)
            self.page.show(self.moments.snapshot(t_s))
            self._show_plots(t_s)

    def _show_plots(self, t_s: float) -> None:
        m, steps = self.moments, self.moments.session.steps
        rows, title = m.plot_rows(t_s)
        if len(rows) < 2:
            return
        joint = self.joint_names.index(self.joint_choice.value)
        times = (steps.stamp_ns[rows] - m.session.start_ns) / 1e9
        cursor = np.full(len(rows), np.nan)
        k = int(np.argmin(np.abs(times - t_s)))
        driven = np.flatnonzero(DRIVEN_MOTORS == joint)
        action = steps.raw_action[rows, driven[0]] if len(driven) else np.full(len(rows), np.nan)
        error = np.abs(steps.q_measured[rows][:, DRIVEN_MOTORS] - m.q_reference[rows])
        joint_error = error[:, driven[0]] if len(driven) else np.full(len(rows), np.nan)
        columns = {
            "position": (steps.q_target[rows, joint], steps.q_measured[rows, joint]),
            "action": (action,),
            "error": (joint_error, _row_mean(error)),
        }
        for name, handle in self._plots.items():
            marker = cursor.copy()
            marker[k] = columns[name][0][k]
            handle.data = (times, *columns[name], marker)
            handle.title = f"{PLOTS[name][0]}: {title}, {self.joint_choice.value}"


def _row_mean(values: np.ndarray) -> np.ndarray:
    """Mean of each row over its finite entries (NaN for a row without any)."""
    finite = np.isfinite(values)
    counts = finite.sum(axis=1)
    return np.where(counts > 0, np.where(finite, values, 0.0).sum(axis=1) / np.maximum(counts, 1), np.nan)
