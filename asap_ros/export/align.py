"""An episode resampled onto its control ticks: one row per actor step.

The tick time of step k is the arrival stamp of the LowState the actor's observation was
built from (the instant the actor "saw"). At that time:

- joints, IMU: the robot's LowState stream, interpolated (quaternion slerped); this is the
  very sample the actor used when it is in the bag, so the synchronisation error is 0;
- root pose: the mocap stream interpolated / slerped; root velocities from a least-squares
  fit to the mocap samples within ±25 ms (linear in the world and the body frame, angular in
  the body frame), which averages mocap noise instead of amplifying it; without mocap the
  root orientation is the robot's IMU estimate, the angular velocity its gyroscope, and
  position / linear velocity are unavailable (``None``);
- command: the LowCmd written by that step (the LowCmd logged nearest the step's write stamp).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.core.quaternion import quat_conjugate, quat_multiply, quat_rotate
from asap_ros.export.episode import RecordedEpisode, Stream
from asap_ros.export.resample import bracket, continuous_hemisphere, interpolate, local_fit, nearest, slerp

GRAVITY_DIRECTION = np.array([0.0, 0.0, -1.0])
ROOT_FROM_MOCAP = "mocap"
ROOT_FROM_IMU = "imu"
MIN_STEPS = 2
VELOCITY_HALF_WINDOW_NS = 25_000_000
"""Root velocities: least-squares fit to the mocap samples within ±25 ms of the tick."""
MOCAP_FILTER_MS = 25.0
"""Default root-pose noise filter of ``metrics`` and ``gap`` (``export`` interpolates: 0)."""


@dataclass(frozen=True)
class SyncReport:
    """How far each resampled value lies from a real sample of its stream (ms)."""

    max_ms: dict[str, float]
    mean_ms: dict[str, float]
    tick_period_ms: tuple[float, float]
    """Smallest and largest interval between consecutive tick times."""
    missing_ticks: int
    """Tick numbers absent between the first and last step (no actor output recorded)."""

    @property
    def largest(self) -> tuple[str, float]:
        """The stream with the largest synchronisation error, and that error (ms)."""
        stream = max(self.max_ms, key=self.max_ms.__getitem__)
        return stream, self.max_ms[stream]

    def to_dict(self) -> dict:
        stream, error = self.largest
        return {
            "largest_ms": error,
            "largest_stream": stream,
            "max_ms": self.max_ms,
            "mean_ms": self.mean_ms,
            "tick_period_ms": list(self.tick_period_ms),
            "missing_ticks": self.missing_ticks,
        }


@dataclass(frozen=True)
class AlignedEpisode:
    """Per control tick (K rows); joint arrays in G1 motor order (29), quaternions w, x, y, z."""

    episode: RecordedEpisode
    time_ns: np.ndarray
    tick: np.ndarray
    phase: np.ndarray
    obs: np.ndarray
    raw_action: np.ndarray
    q_target: np.ndarray
    q: np.ndarray
    dq: np.ndarray
    tau_est: np.ndarray
    imu_quat_wxyz: np.ndarray
    gyro: np.ndarray
    acc: np.ndarray
    cmd_stamp_ns: np.ndarray
    cmd_q: np.ndarray
    cmd_dq: np.ndarray
    cmd_tau: np.ndarray
    cmd_kp: np.ndarray
    cmd_kd: np.ndarray
    root_quat_wxyz: np.ndarray
    root_ang_vel_body: np.ndarray
    root_pos: np.ndarray | None
    """``None`` without mocap (the G1 has no position estimate of its own)."""
    root_lin_vel_world: np.ndarray | None
    root_stamp_ns: np.ndarray
    """Stamp of the root-pose sample nearest each tick (mocap, or the LowState for the IMU)."""
    root_source: str
    """``mocap``, or ``imu`` when the bag has no mocap (orientation and angular velocity only)."""
    sync: SyncReport

    def __len__(self) -> int:
        return len(self.tick)

    @property
    def root_lin_vel_body(self) -> np.ndarray | None:
        if self.root_lin_vel_world is None:
            return None
        return quat_rotate(quat_conjugate(self.root_quat_wxyz), self.root_lin_vel_world)

    @property
    def projected_gravity(self) -> np.ndarray:
        """Gravity direction in the body frame from the robot's IMU (what the actor observes)."""
        return quat_rotate(quat_conjugate(self.imu_quat_wxyz), GRAVITY_DIRECTION)

    def require_root_position(self, what: str) -> np.ndarray:
        """Root positions, or a :class:`ConfigError` naming the missing mocap topic."""
        if self.root_pos is None:
            raise ConfigError(
                self.episode.source,
                self.episode.mocap_topic,
                f"{what} needs the root position from motion capture, and the bag has no samples on this "
                "topic during the episode (the G1 has no position estimate of its own)",
            )
        return self.root_pos


def body_angular_velocity(quats_wxyz: np.ndarray, rates_wxyz: np.ndarray) -> np.ndarray:
    """Body-frame angular velocity (rad/s) from orientations and their time derivatives: ``2 vec(q* ⊗ dq/dt)``."""
    return 2.0 * quat_multiply(quat_conjugate(quats_wxyz), rates_wxyz)[:, 1:]


def _strictly_increasing(stream: Stream) -> Stream:
    """Drop samples that repeat the previous stamp (a finite difference needs distinct times)."""
    keep = np.concatenate([[True], np.diff(stream.stamps_ns) > 0])
    if keep.all():
        return stream
    return Stream(stream.topic, stream.stamps_ns[keep], {k: v[keep] for k, v in stream.columns.items()})


def _ms(values_ns: np.ndarray) -> tuple[float, float]:
    values = np.abs(np.asarray(values_ns, dtype=np.float64)) / 1e6
    return float(values.max()), float(values.mean())


def align_episode(episode: RecordedEpisode, mocap_filter_ns: int = 0) -> AlignedEpisode:
    """Resample every stream of ``episode`` onto its control ticks.

    ``mocap_filter_ns`` > 0: the root pose is the value of the least-squares parabola through
    the mocap samples within that half window (noise filter) instead of interpolated/slerped.
    """
    steps = episode.steps
    if mocap_filter_ns < 0:
        raise ConfigError(None, "--mocap-filter-ms", "must be >= 0", mocap_filter_ns / 1e6)
    if len(steps) < MIN_STEPS:
        raise ConfigError(episode.source, f"episode {episode.index}", "too few actor steps to export", len(steps))
    for stream in (episode.lowstate, episode.lowcmd):
        if len(stream) == 0:
            raise ConfigError(episode.source, stream.topic, f"no samples during episode {episode.index}")
    times = np.asarray(steps.state_stamp_ns, dtype=np.int64)
    errors: dict[str, np.ndarray] = {}

    state = episode.lowstate
    at_state = bracket(state.stamps_ns, times)
    errors[state.topic] = at_state.sync_error_ns

    cmd = episode.lowcmd
    step_cmd = nearest(cmd.stamps_ns, steps.stamp_ns)
    cmd_stamps = cmd.stamps_ns[step_cmd]
    errors[cmd.topic] = cmd_stamps - steps.stamp_ns

    imu_quat = slerp(at_state, state["quat_wxyz"])
    if episode.mocap is not None and len(episode.mocap) >= 2:
        mocap = _strictly_increasing(episode.mocap)
        at_mocap = bracket(mocap.stamps_ns, times)
        errors[mocap.topic] = at_mocap.sync_error_ns
        quats = mocap["quat_wxyz"]
        mocap_quat = continuous_hemisphere(quats / np.linalg.norm(quats, axis=1, keepdims=True))
        _, root_lin_vel = local_fit(mocap.stamps_ns, mocap["pos"], times, VELOCITY_HALF_WINDOW_NS)
        fitted_quat, quat_rate = local_fit(mocap.stamps_ns, mocap_quat, times, VELOCITY_HALF_WINDOW_NS)
        if mocap_filter_ns:
            root_pos, _ = local_fit(mocap.stamps_ns, mocap["pos"], times, mocap_filter_ns)
            root_quat, _ = local_fit(mocap.stamps_ns, mocap_quat, times, mocap_filter_ns)
            root_quat = continuous_hemisphere(root_quat / np.linalg.norm(root_quat, axis=1, keepdims=True))
        else:
            root_pos, root_quat = interpolate(at_mocap, mocap["pos"]), slerp(at_mocap, mocap_quat)
        fitted_quat /= np.linalg.norm(fitted_quat, axis=1, keepdims=True)
        root_ang_vel = body_angular_velocity(fitted_quat, quat_rate)
        root_stamp = mocap.stamps_ns[nearest(mocap.stamps_ns, times)]
        source = ROOT_FROM_MOCAP
    else:
        root_pos = root_lin_vel = None
        root_quat = imu_quat
        root_ang_vel = interpolate(at_state, state["gyro"])
        root_stamp = state.stamps_ns[nearest(state.stamps_ns, times)]
        source = ROOT_FROM_IMU

    ticks = np.asarray(steps.tick, dtype=np.int64)
    periods = np.diff(times) / 1e6
    sync = SyncReport(
        max_ms={topic: _ms(e)[0] for topic, e in errors.items()},
        mean_ms={topic: _ms(e)[1] for topic, e in errors.items()},
        tick_period_ms=(float(periods.min()), float(periods.max())),
        missing_ticks=int(ticks[-1] - ticks[0] + 1 - len(np.unique(ticks))),
    )
    return AlignedEpisode(
        episode=episode,
        time_ns=times,
        tick=ticks,
        phase=np.asarray(steps.phase, dtype=np.float64),
        obs=np.asarray(steps.obs, dtype=np.float32),
        raw_action=np.asarray(steps.raw_action, dtype=np.float32),
        q_target=np.asarray(steps.q_target, dtype=np.float64),
        q=interpolate(at_state, state["q"]),
        dq=interpolate(at_state, state["dq"]),
        tau_est=interpolate(at_state, state["tau_est"]),
        imu_quat_wxyz=imu_quat,
        gyro=interpolate(at_state, state["gyro"]),
        acc=interpolate(at_state, state["acc"]),
        cmd_stamp_ns=cmd_stamps,
        cmd_q=np.asarray(cmd["q"][step_cmd], dtype=np.float64),
        cmd_dq=np.asarray(cmd["dq"][step_cmd], dtype=np.float64),
        cmd_tau=np.asarray(cmd["tau"][step_cmd], dtype=np.float64),
        cmd_kp=np.asarray(cmd["kp"][step_cmd], dtype=np.float64),
        cmd_kd=np.asarray(cmd["kd"][step_cmd], dtype=np.float64),
        root_quat_wxyz=root_quat,
        root_ang_vel_body=root_ang_vel,
        root_pos=root_pos,
        root_lin_vel_world=root_lin_vel,
        root_stamp_ns=root_stamp,
        root_source=source,
        sync=sync,
    )
