"""Sim-to-real gap: the recorded commands replayed open-loop in the NOMINAL simulator.

Each episode is cut into windows (1 s by default, as in the ASAP paper). At the start of a
window the MuJoCo G1 (``config/sim.yaml``'s model and physics rate, ``nominal`` profile, no
elastic band) is reset to the recorded state: pelvis pose from mocap, angular velocity from
the IMU gyroscope, linear velocity by leg odometry (the stance foot stays still), joint
angles and velocities from the LowState. Then every physics step applies the recorded LowCmd
in force at that time through the simulator's own motor model (PD law, effort limits;
nominal torque scale and no delay), and the simulated joint angles are compared with the
recorded ones at every recorded LowState. What the nominal model gets wrong
about the robot shows up as joints whose simulated trajectory drifts away from the recording
right after each reset (the ranking); later in a window the whole body drifts with them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.core.state import NUM_MOTORS
from asap_ros.export.align import AlignedEpisode
from asap_ros.export.leg_odometry import StanceOdometry
from asap_ros.export.resample import bracket, interpolate, newest_at

DEFAULT_WINDOW_S = 1.0
NOMINAL_PROFILE = "nominal"
STANDS_OUT_RATIO = 3.0
STANDS_OUT_MIN_RAD = 0.010
"""A joint "stands out" when its ranked divergence (rad) exceeds both this multiple of the
median joint's and this absolute floor. The floor sits between what nominal simulated kick
sessions replay to in their most sensitive joint (up to 5.3 mrad) and a knee at 60% torque
(at least 18.0 mrad); docs/export.md gives the sessions behind both figures."""
TRIM_SHARE = 0.15
"""Share of the resets (rounded down: 2 of 15) whose divergence each joint's ranking leaves out,
its worst: a contact's chaos (a foot landing or pushing off) peaks in one or two resets of 0.2 s;
a model error diverges in every reset where its joint is loaded."""
RANK_HORIZON_S = 0.2
"""Joints are ranked by their divergence within this time after each reset (see :func:`rank_joints`)."""


@dataclass(frozen=True)
class WindowReplay:
    """One replayed window: recorded and simulated joint angles at the recorded LowState times."""

    start_ns: int
    times_s: np.ndarray
    """(S,) seconds since the window start (the reset)."""
    recorded_q: np.ndarray
    simulated_q: np.ndarray
    """(S, 29) G1 motor order."""
    velocity_source: str
    """Where the reset's pelvis linear velocity came from: ``stance`` (leg odometry) or ``mocap``."""

    @property
    def error(self) -> np.ndarray:
        """(S, 29) simulated minus recorded joint angle, rad."""
        return self.simulated_q - self.recorded_q

    def early_error(self, horizon_s: float) -> np.ndarray:
        """The error rows within ``horizon_s`` after the reset."""
        return self.error[self.times_s <= horizon_s]


@dataclass(frozen=True)
class EpisodeGap:
    """All replayed windows of one episode."""

    name: str
    outcome: str
    cut_short: bool
    windows: tuple[WindowReplay, ...]
    early: tuple[WindowReplay, ...]
    """Replays of the ranking horizon from a reset at every multiple of it: the early divergence of
    every part of the episode, not only of the first part of each window."""

    def ranking(self, joint_names: Sequence[str], horizon_s: float) -> list[JointDivergence]:
        return rank_joints(self.early, self.windows, joint_names, horizon_s)


@dataclass(frozen=True)
class JointDivergence:
    """One row of the ranked table (angles in rad)."""

    rank: int
    joint: str
    early_rms_rad: float
    """RMS divergence within the ranking horizon after each reset: the ranking key."""
    window_rms_rad: float
    """RMS divergence over whole windows."""
    end_error_rad: float
    """Mean absolute divergence at the end of the windows."""
    ratio_to_median: float
    """``early_rms_rad`` over the median joint's."""

    @property
    def stands_out(self) -> bool:
        return self.ratio_to_median > STANDS_OUT_RATIO and self.early_rms_rad > STANDS_OUT_MIN_RAD


def trimmed_rms(errors: Sequence[np.ndarray]) -> np.ndarray:
    """Per joint, the RMS over the resets (each reset's rows ``errors[k]``, weighted alike) without
    that joint's worst :data:`TRIM_SHARE` of them (rounded down)."""
    mean_squares = np.sort([np.mean(e**2, axis=0) for e in errors], axis=0)
    kept = len(mean_squares) - int(len(mean_squares) * TRIM_SHARE)
    return np.sqrt(np.mean(mean_squares[:kept], axis=0))


def rank_joints(early: Sequence[WindowReplay], windows: Sequence[WindowReplay], joint_names: Sequence[str],
                horizon_s: float = RANK_HORIZON_S) -> list[JointDivergence]:  # fmt: skip
    """Joints by decreasing divergence within ``horizon_s`` of the resets of ``early``; the whole
    ``windows`` give the other columns.

    Ranking on the early divergence, not the whole window: an open-loop humanoid drifts out
    of balance, and after a few hundred milliseconds every joint diverges with it; right after
    the reset each joint diverges by what the model gets wrong about its own motion. Resets
    every ``horizon_s`` cover the whole episode, and each joint's worst :data:`TRIM_SHARE` of
    them are left out (:func:`trimmed_rms`): a model error diverges wherever its joint is loaded,
    a contact's chaos (a foot landing or pushing off) in the few resets near it.
    """
    def rms(errors: list[np.ndarray]) -> np.ndarray:
        return np.sqrt(np.mean(np.concatenate(errors) ** 2, axis=0))

    early_rms = trimmed_rms([w.early_error(horizon_s) for w in early])
    whole = rms([w.error for w in windows])
    end = np.mean([np.abs(w.error[-1]) for w in windows], axis=0)
    median = float(np.median(early_rms))
    return [
        JointDivergence(rank + 1, joint_names[j], float(early_rms[j]), float(whole[j]), float(end[j]),
                        float(early_rms[j] / median) if median > 0 else float("inf"))  # fmt: skip
        for rank, j in enumerate(np.argsort(-early_rms, kind="stable"))
    ]


def replayed_ticks(times_ns: np.ndarray, skip_start_s: float) -> np.ndarray:
    """The tick times after the first ``skip_start_s`` of an episode (at least its last two)."""
    if skip_start_s < 0:
        raise ConfigError(None, "--skip-start", "must be >= 0", skip_start_s)
    kept = times_ns[times_ns >= times_ns[0] + int(skip_start_s * 1e9)]
    return kept if len(kept) >= 2 else times_ns[-2:]


def episode_windows(times_ns: np.ndarray, window_s: float) -> list[tuple[int, int]]:
    """(start, end) of consecutive windows over the tick times, each starting on a tick; the last
    one ends with the episode (shorter; a tail under a tenth of a window joins the one before)."""
    if not window_s > 0:
        raise ConfigError(None, "--window", "must be positive", window_s)
    window_ns = int(round(window_s * 1e9))
    first, last = int(times_ns[0]), int(times_ns[-1])
    count = max(1, int(np.ceil((last - first - window_ns // 10) / window_ns)))
    starts = [int(times_ns[np.searchsorted(times_ns, first + i * window_ns)]) for i in range(count)]
    return list(zip(starts, starts[1:] + [last]))


class OpenLoopReplayer:
    """The nominal MuJoCo G1 stepping recorded commands from recorded states."""

    def __init__(self, sim_config_path: str | None = None, assets_dir: str | None = None):
        from asap_ros.config.assets import asset_path
        from asap_ros.config.paths import config_file
        from asap_ros.config.robot import load_robot_model
        from asap_ros.sim.config import BandConfig, load_sim_config
        from asap_ros.sim.motors import MotorModel
        from asap_ros.sim.physics import G1Physics
        from asap_ros.sim.profile import load_profile

        config = load_sim_config(sim_config_path)
        robot_file = config.robot if "/" in config.robot else config_file(config.robot)
        self.robot = load_robot_model(robot_file)
        self.profile = load_profile(NOMINAL_PROFILE, self.robot.joint_names)
        self.physics = G1Physics(
            asset_path(config.model, assets_dir), self.robot.joint_names, 1.0 / config.physics_rate_hz,
            self.robot.default_q, self.profile, BandConfig(enabled=False), config.source,
        )  # fmt: skip
        self.motors = MotorModel(self.physics.effort_limit, self.profile.torque_scale)
        model = self.physics.model
        joints = model.actuator_trnid[:, 0]
        self._qpos = model.jnt_qposadr[joints]
        self._qvel = model.jnt_dofadr[joints]
        self.odometry = StanceOdometry(model)
        self.description = (
            f"{config.model}, {config.physics_rate_hz:g} Hz physics, profile {self.profile.name}, no elastic band"
        )

    def reset(self, pos: np.ndarray, quat_wxyz: np.ndarray, lin_vel_world: np.ndarray, ang_vel_body: np.ndarray,
              q: np.ndarray, dq: np.ndarray) -> str:  # fmt: skip
        """Put the body in a recorded state; returns where the pelvis linear velocity came from.

        Angular velocity (body frame): the gyroscope. Linear velocity: stance-foot leg odometry
        (:class:`~asap_ros.export.leg_odometry.StanceOdometry`), ``lin_vel_world`` (mocap) where no
        foot is planted.
        """
        data = self.physics.data
        data.qpos[0:3], data.qpos[3:7] = pos, quat_wxyz / np.linalg.norm(quat_wxyz)
        data.qvel[3:6] = ang_vel_body
        data.qpos[self._qpos], data.qvel[self._qvel] = q, dq
        data.qacc_warmstart[:] = 0.0
        return self.odometry.set_pelvis_velocity(data, lin_vel_world)

    def replay_window(self, aligned: AlignedEpisode, start_ns: int, end_ns: int) -> WindowReplay:
        """Reset at the tick ``start_ns`` and step the recorded commands until ``end_ns``."""
        from asap_ros.sim.motors import MotorCommand

        k = int(np.searchsorted(aligned.time_ns, start_ns))
        root_pos = aligned.require_root_position("gap replay (the simulated robot is reset to the recorded pose)")
        source = self.reset(root_pos[k], aligned.root_quat_wxyz[k], aligned.root_lin_vel_world[k], aligned.gyro[k],
                            aligned.q[k], aligned.dq[k])  # fmt: skip
        episode = aligned.episode
        cmd, state = episode.lowcmd, episode.lowstate.between(start_ns, end_ns)
        dt_ns = int(round(self.physics.timestep * 1e9))
        steps = max(1, int(np.ceil((end_ns - start_ns) / dt_ns)))
        step_times = start_ns + np.arange(steps) * dt_ns
        in_force = newest_at(cmd.stamps_ns, step_times)
        simulated = np.empty((steps + 1, NUM_MOTORS))
        simulated[0] = self.physics.q()
        commands: dict[int, MotorCommand | None] = {-1: None}
        for n in range(steps):
            i = int(in_force[n])
            if i not in commands:
                commands[i] = MotorCommand(cmd["enabled"][i], cmd["q"][i], cmd["dq"][i], cmd["tau"][i],
                                           cmd["kp"][i], cmd["kd"][i])  # fmt: skip
            self.physics.step(self.motors.torque(commands[i], self.physics.q(), self.physics.dq()))
            simulated[n + 1] = self.physics.q()
        grid = np.append(step_times, start_ns + steps * dt_ns)
        at = bracket(grid, state.stamps_ns)
        return WindowReplay(
            start_ns=start_ns,
            times_s=(state.stamps_ns - start_ns) / 1e9,
            recorded_q=state["q"],
            simulated_q=interpolate(at, simulated),
            velocity_source=source,
        )

    def replay_episode(self, aligned: AlignedEpisode, window_s: float = DEFAULT_WINDOW_S, skip_start_s: float = 0.0,
                       on_window: Callable[[], None] | None = None,
                       rank_horizon_s: float = RANK_HORIZON_S) -> EpisodeGap:  # fmt: skip
        """Every window of one episode after its first ``skip_start_s``, and every ranking horizon
        (:attr:`EpisodeGap.early`); ``on_window`` is called after each replay."""
        ticks = replayed_ticks(aligned.time_ns, skip_start_s)

        def replay(length_s: float) -> list[WindowReplay]:
            replays = []
            for start, end in episode_windows(ticks, length_s):
                replays.append(self.replay_window(aligned, start, end))
                if on_window is not None:
                    on_window()
            return replays

        windows, early = replay(window_s), replay(rank_horizon_s)
        episode = aligned.episode
        return EpisodeGap(episode.name, episode.outcome, episode.cut_short, tuple(windows), tuple(early))
