"""ASAP's open-loop protocol: recorded actions replayed from recorded states, with and without Δa.

Each motion is cut into windows (``window_s``, every ``stride_s``). At a window's first row the
trainer simulator (:mod:`asap_ros.export.trainer_sim`) is reset to the recorded state, with the
recorded velocities or the ones ASAP's motion library derives (``reset_velocity``); then, at
policy step k, it applies the recorded action of row ``start + k + 1`` (ASAP's lookup at
``(k + 1)·dt + start``, lower frame: with the saved row convention the action computed from
row ``start + k``'s state) for ``decimation`` physics steps. The replayed body is compared with
the recorded rows by the paper's metrics (27 keypoints, first frame excluded) over each
horizon, and joint by joint.

A delta model (ONNX ``actor_obs`` 108 -> ``action`` 23) is queried at every policy step with
the simulator's observation: ``trainer`` semantics add ``0.25·Δa`` and feed the model the action
about to be applied (``delta_a_open_loop.py``); ``finetune`` semantics add ``Δa`` unscaled and feed
it the action applied one step before (``delta_a_closed_loop.py``, what policy fine-tuning sees);
``physics_rate`` semantics query the model every physics step (as the commented perfect delta of
``delta_a_open_loop.py`` is computed from the joint state in ``_compute_torques``), the rest as ``trainer``.
With the simulator's ``runtime`` targets every target is clipped to the joint limits as the robot's
was, and the delta's recorded size is what reaches the target (``clip(with) − clip(without)``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from asap_ros.core.errors import ConfigError
from asap_ros.core.quaternion import quat_rotate
from asap_ros.export.implied_scale import scale_sums
from asap_ros.export.motion_rows import MotionRows
from asap_ros.export.trainer_sim import ACTION_SCALE, TRAINER_TARGETS, BodyState, TrainerSim
from asap_ros.export.trainer_velocity import joint_velocity, root_angular_velocity, root_linear_velocity
from asap_ros.runtime.actor import OnnxModel
from asap_ros.tracking.kinematics import DRIVEN_MOTORS, KeypointModel
from asap_ros.tracking.metrics import SUCCESS_THRESHOLD_M, body_distances, e_acc, e_g_mpjpe, e_mpjpe, e_vel

HORIZONS_S = (0.25, 0.5, 1.0)
METRICS = ("g_mpjpe_mm", "mpjpe_mm", "vel_mm_per_frame", "acc_mm_per_frame2")
METRIC_FUNCTIONS = {"g_mpjpe_mm": e_g_mpjpe, "mpjpe_mm": e_mpjpe, "vel_mm_per_frame": e_vel,
                    "acc_mm_per_frame2": e_acc}  # fmt: skip
MEASURED, RECORDED, TRAINER = "measured", "recorded", "trainer"
RESET_VELOCITIES = (MEASURED, RECORDED, TRAINER)
"""Velocities at a reset: ``measured`` (gyro, stance-foot leg odometry, LowState dq), ``recorded`` (the
file's mocap-fit root velocities, LowState dq) or ``trainer`` (ASAP's motion-library differences)."""
WITHOUT, WITH, FINETUNE, PHYSICS_RATE = "without", "with", "finetune", "physics_rate"
"""Replays: no delta; Δa per policy step (the trainer's); as fine-tuning adds it; Δa recomputed every physics step."""
LAGS = (-1, 0, 1)
"""Action shifts (policy steps) of the lag scan: the recorded pairing must be best at 0."""
LAG_HORIZON_S = 0.25
DeltaModel = Callable[[np.ndarray], np.ndarray]
"""A delta model: one float32 observation (108) -> Δa (23): an :class:`OnnxModel`, or a fit in memory."""
TARGETS_METADATA = "asap_ros.delta.targets"
"""ONNX metadata key of the target semantics a fitted delta model was fitted under."""
DELTA_INPUT, DELTA_OUTPUT = ("actor_obs", 108), ("action", 23)
"""ASAP's exported delta model (``eval_agent.py``, ``export_policy_as_onnx``)."""


def load_delta_model(path: str) -> OnnxModel:
    """A delta-action model checked to map ``actor_obs`` [1, 108] to ``action`` [1, 23] (errors name the file)."""
    return OnnxModel(path, *DELTA_INPUT, *DELTA_OUTPUT, source=path, key="delta model")


def targets_mismatch(model: OnnxModel, targets: str) -> str | None:
    """A warning when ``model`` (its ``asap_ros.delta.targets`` metadata) was fitted under other target semantics."""
    fitted = model.session.get_modelmeta().custom_metadata_map.get(TARGETS_METADATA)
    if fitted is None or fitted == targets:
        return None
    return (f"WARNING: {model.path} was fitted with --targets {fitted} and is replayed with --targets {targets}: "
            "its Δa describes another simulator (with or without the joint-limit clamp)")


def horizon_steps(horizon_s: float, dt: float) -> int:
    """Policy steps within ``horizon_s`` (frames 0..n are compared; the first, the reset, is excluded)."""
    return int(np.floor(horizon_s / dt + 1e-9))


@dataclass(frozen=True)
class Trajectory:
    """A replayed window: the body at each policy step (row 0 = the reset state)."""

    root_pos: np.ndarray
    root_quat_wxyz: np.ndarray
    dof: np.ndarray
    applied_delta: np.ndarray
    """(n, 23) the target offset the delta added, rad (``0.25·Δa``, or ``Δa`` unscaled; with runtime targets
    the change of the clipped target); zeros without."""
    observations: np.ndarray | None = None
    """(n, 108) what the delta was queried on (``with`` semantics only), for its implied torque scale."""


@dataclass(frozen=True)
class Scores:
    """One replay of one window against the recording."""

    metrics: dict[float, dict[str, float]]
    """horizon (s) -> metric -> value."""
    joint_error: dict[float, np.ndarray]
    """horizon (s) -> (23,) mean |replayed − recorded| joint angle over frames 1..n, rad."""
    fell: bool
    """The mean keypoint distance exceeded 0.5 m (the paper's failure) within the window."""
    mean_applied_delta: np.ndarray
    """(23,) mean |target offset added by the delta| over the window's steps, rad."""
    scale_sums: np.ndarray | None = None
    """(2, 23) the implied torque scale's sums (:func:`asap_ros.export.implied_scale.scale_sums`), ``with`` only."""
    steps: int = 0


@dataclass(frozen=True)
class WindowResult:
    motion: str
    name: str
    start_row: int
    scores: dict[str, Scores]
    """``without``, and ``with`` / ``finetune`` when a delta model ran."""
    lag_joint_error: dict[int, float]
    """lag (steps) -> mean joint error over the first ``LAG_HORIZON_S``, rad."""
    lag_mpjpe: dict[int, float]
    """lag (steps) -> E_mpjpe over the first ``LAG_HORIZON_S``, mm."""


@dataclass(frozen=True)
class ClampShare:
    """How often ``0.25·a + default`` lies outside the joint limits (the robot clamped it; the trainer does not)."""

    rows: int
    clamped_rows: int
    per_joint: dict[str, float]
    """joint -> share of rows clamped (only joints clamped at least once)."""


@dataclass
class OpenLoopResult:
    windows: list[WindowResult] = field(default_factory=list)
    clamps: ClampShare | None = None
    skipped: list[str] = field(default_factory=list)
    joint_names: tuple[str, ...] = ()
    simulator: str = ""
    reset_velocity: str = RECORDED
    delta_model: str | None = None
    targets: str = TRAINER_TARGETS
    """The simulator's target semantics: ``trainer`` (unclamped) or ``runtime`` (joint-limit clipped)."""
    window_s: float = 1.0
    stride_s: float = 1.0
    skip_start_s: float = 0.0


class OpenLoopReplayer:
    """Replays windows of recorded motions in the trainer simulator."""

    def __init__(self, sim: TrainerSim | None = None, keypoints: KeypointModel | None = None,
                 reset_velocity: str = RECORDED):  # fmt: skip
        if reset_velocity not in RESET_VELOCITIES:
            raise ConfigError(None, "--reset-velocity", f"must be one of {', '.join(RESET_VELOCITIES)}",
                              reset_velocity)  # fmt: skip
        self.sim = sim or TrainerSim()
        self.keypoints = keypoints or KeypointModel()
        self.reset_velocity = reset_velocity
        # keyed by id(rows), each entry holding its rows alive: an id names one object only while that
        # object lives, and a freed MotionRows' id is soon another's
        self._velocities: dict[int, tuple[MotionRows, tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self._recorded_keypoints: dict[int, tuple[MotionRows, np.ndarray]] = {}

    # --- per motion -----------------------------------------------------------------------------
    def check_rate(self, rows: MotionRows) -> None:
        if abs(rows.fps * self.sim.policy_dt - 1.0) > 1e-6:
            problem = (f"rows are at {rows.fps:g} fps but the trainer's policy steps at {1 / self.sim.policy_dt:g} Hz "
                       "(--physics-hz / --decimation): each row must be one policy step")  # fmt: skip
            raise ConfigError(rows.source, f"{rows.name}.fps", problem, rows.fps)

    def velocities(self, rows: MotionRows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Root linear and angular velocity (world) and joint velocities to reset to, per row."""
        cached = self._velocities.get(id(rows))
        if cached is None:
            if self.reset_velocity == TRAINER:
                found = (root_linear_velocity(rows.root_pos, rows.dt), root_angular_velocity(rows.root_quat_wxyz, rows.dt),
                         joint_velocity(rows.dof, rows.dt))  # fmt: skip
            elif self.reset_velocity == MEASURED:
                found = measured_velocities(rows)
            elif rows.has_velocities:
                found = (rows.root_lin_vel_world, rows.root_ang_vel_world, rows.dof_vel)  # type: ignore[assignment]
            else:
                problem = ("--reset-velocity recorded needs root_lin_vel, root_ang_vel and dof_vel; the file has "
                           "none (use --reset-velocity trainer)")  # fmt: skip
                raise ConfigError(rows.source, f"{rows.name}.dof_vel", problem)
            cached = self._velocities[id(rows)] = (rows, found)
        return cached[1]

    def recorded_keypoints(self, rows: MotionRows) -> np.ndarray:
        cached = self._recorded_keypoints.get(id(rows))
        if cached is None:
            keypoints = self.keypoints.keypoints(rows.root_pos, rows.root_quat_wxyz, rows.dof)
            cached = self._recorded_keypoints[id(rows)] = (rows, keypoints)
        return cached[1]

    def state_at(self, rows: MotionRows, row: int) -> BodyState:
        """Row ``row``'s state; with ``measured`` velocities its linear velocity is the mocap fallback."""
        lin, ang, dof_vel = self.velocities(rows)
        return BodyState(rows.root_pos[row], rows.root_quat_wxyz[row], lin[row], ang[row], rows.dof[row], dof_vel[row])

    def reset(self, rows: MotionRows, row: int) -> str | None:
        """Reset the simulator to row ``row`` (``measured``: the pelvis velocity by leg odometry)."""
        return self.sim.reset(self.state_at(rows, row), leg_odometry=self.reset_velocity == MEASURED)

    # --- one replay ---------------------------------------------------------------------------
    def replay(self, rows: MotionRows, start: int, steps: int, lag: int = 0, delta: DeltaModel | None = None,
               semantics: str = WITH) -> Trajectory:  # fmt: skip
        """Reset at row ``start`` and apply the actions of rows ``start + k + 1 + lag`` for ``steps`` steps."""
        sim = self.sim
        self.reset(rows, start)
        root_pos, root_quat, dof = np.empty((steps + 1, 3)), np.empty((steps + 1, 4)), np.empty((steps + 1, 23))
        applied = np.zeros((steps, 23))
        root_pos[0], root_quat[0], dof[0] = sim.pose()
        zero = np.zeros(23)
        previous = np.zeros(23, dtype=np.float32)
        scale = ACTION_SCALE if semantics == WITH else 1.0
        observations = np.zeros((steps, 108), np.float32) if delta is not None and semantics == WITH else None
        last = len(rows) - 1
        for k in range(steps):
            action = rows.action[min(max(start + k + 1 + lag, 0), last)]
            if delta is not None and semantics == PHYSICS_RATE:
                previous, applied[k] = self._physics_rate_step(action, previous, delta)
                root_pos[k + 1], root_quat[k + 1], dof[k + 1] = sim.pose()
                continue
            if delta is None:
                offset = zero
            else:
                seen = action if semantics == WITH else rows.action[min(max(start + k + lag, 0), last)]
                observation = sim.delta_observation(previous, seen)
                if observations is not None:
                    observations[k] = observation
                previous = delta(observation)
                offset = previous
                applied[k] = scale * previous
            ctrl = sim.targets(action, offset, scale)
            if delta is not None and sim.clamps_targets:  # what of the delta survives the joint-limit clip
                applied[k] = (ctrl - sim.targets(action, zero, scale))[DRIVEN_MOTORS]
            sim.step(ctrl)
            root_pos[k + 1], root_quat[k + 1], dof[k + 1] = sim.pose()
        return Trajectory(root_pos, root_quat, dof, applied, observations)

    def _physics_rate_step(self, action: np.ndarray, previous: np.ndarray,
                           delta: DeltaModel) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """One policy step with Δa recomputed before every physics step; returns the last Δa and the
        target offset it added, averaged over the physics steps (rad)."""
        sim, zero = self.sim, np.zeros(23)
        applied = np.zeros(23)
        for _ in range(sim.decimation):
            previous = delta(sim.delta_observation(previous, action))
            ctrl = sim.targets(action, previous)
            if sim.clamps_targets:
                applied += (ctrl - sim.targets(action, zero))[DRIVEN_MOTORS]
            else:
                applied += ACTION_SCALE * previous
            sim.physics_step(ctrl)
        return previous, applied / sim.decimation

    def score(self, rows: MotionRows, start: int, trajectory: Trajectory, horizons: Sequence[float]) -> Scores:
        """The metrics of a replay against rows ``start``.. of the recording."""
        steps = len(trajectory.dof) - 1
        replayed = self.keypoints.keypoints(trajectory.root_pos, trajectory.root_quat_wxyz, trajectory.dof)
        recorded = self.recorded_keypoints(rows)[start : start + steps + 1]
        metrics, joints = {}, {}
        for horizon in horizons:
            n = horizon_steps(horizon, rows.dt) + 1
            metrics[horizon] = {name: f(replayed[:n], recorded[:n]) for name, f in METRIC_FUNCTIONS.items()}
            joints[horizon] = np.abs(trajectory.dof[1:n] - rows.dof[start + 1 : start + n]).mean(axis=0)
        fell = bool((body_distances(replayed, recorded).mean(axis=1) > SUCCESS_THRESHOLD_M).any())
        sums = None
        if trajectory.observations is not None:
            sums = scale_sums(trajectory.observations, trajectory.applied_delta, self.sim.robot, self.sim.clamps_targets)
        return Scores(metrics, joints, fell, np.abs(trajectory.applied_delta).mean(axis=0), sums, steps)


def measured_velocities(rows: MotionRows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What ``measured`` resets start from: the mocap-fit linear velocity (the leg odometry's fallback),
    the gyro rotated into the world, the LowState joint velocities (errors name the file and the key)."""
    missing = [key for key, value in (("gyro", rows.gyro), ("root_lin_vel", rows.root_lin_vel_world),
                                      ("dof_vel", rows.dof_vel)) if value is None]  # fmt: skip
    if missing:
        problem = (f"--reset-velocity measured needs the IMU's gyro, the mocap root_lin_vel and dof_vel; the file has "
                   f"no {', '.join(missing)} (export the bag again, or use --reset-velocity recorded / trainer)")
        raise ConfigError(rows.source, f"{rows.name}.{missing[0]}", problem)
    assert rows.gyro is not None and rows.root_lin_vel_world is not None and rows.dof_vel is not None
    return rows.root_lin_vel_world, quat_rotate(rows.root_quat_wxyz, rows.gyro), rows.dof_vel


def first_row(rows: MotionRows, skip_start_s: float) -> int:
    """The first row used after leaving out the first ``skip_start_s`` of a motion."""
    if skip_start_s < 0:
        raise ConfigError(None, "--skip-start", "must be >= 0", skip_start_s)
    return int(round(skip_start_s * rows.fps))


def windows_of(rows: MotionRows, window_s: float, stride_s: float, skip_start_s: float = 0.0) -> list[int]:
    """Start rows of the windows that fit in the motion (the lag scan's +1 shift included)."""
    if not window_s > 0 or not stride_s > 0:
        raise ConfigError(None, "--window/--stride", "must be positive", (window_s, stride_s))
    steps = horizon_steps(window_s, rows.dt)
    stride = max(1, int(round(stride_s * rows.fps)))
    return list(range(first_row(rows, skip_start_s), len(rows) - steps - 1, stride))


def clamp_share(recordings: Sequence[MotionRows], sim: TrainerSim) -> ClampShare:
    """Share of rows whose target ``0.25·a + default`` is outside the joint limits, per joint."""
    robot = sim.robot
    low, high = robot.q_lower[DRIVEN_MOTORS], robot.q_upper[DRIVEN_MOTORS]
    targets = np.concatenate([ACTION_SCALE * r.action.astype(np.float64) + sim.driven_default for r in recordings])
    outside = (targets < low) | (targets > high)
    names = [robot.joint_names[i] for i in DRIVEN_MOTORS]
    share = outside.mean(axis=0)
    return ClampShare(len(targets), int(outside.any(axis=1).sum()),
                      {n: float(s) for n, s in zip(names, share) if s > 0})  # fmt: skip


def run_openloop(recordings: Sequence[MotionRows], replayer: OpenLoopReplayer, window_s: float = 1.0,
                 stride_s: float = 1.0, delta: DeltaModel | None = None, finetune: bool = False,
                 horizons: Sequence[float] = HORIZONS_S, delta_path: str | None = None, skip_start_s: float = 0.0,
                 on_window: Callable[[], None] | None = None, physics_rate: bool = False) -> OpenLoopResult:  # fmt: skip
    """Every window of every recording, without and (with a model) with the delta (``finetune``,
    ``physics_rate``: also those replays); the lag scan; clamps."""
    if max(horizons) > window_s + 1e-9:
        raise ConfigError(None, "--window", f"must cover the longest horizon ({max(horizons):g} s)", window_s)
    sim = replayer.sim
    result = OpenLoopResult(joint_names=tuple(sim.robot.joint_names[i] for i in DRIVEN_MOTORS),
                            simulator=sim.description, reset_velocity=replayer.reset_velocity,
                            delta_model=delta_path, targets=sim.target_semantics, window_s=window_s, stride_s=stride_s,
                            skip_start_s=skip_start_s)  # fmt: skip
    for rows in recordings:
        replayer.check_rate(rows)
        starts = windows_of(rows, window_s, stride_s, skip_start_s)
        if not starts:
            after = f" after the first {skip_start_s:g} s" if skip_start_s else ""
            result.skipped.append(f"{rows.name}: {len(rows)} rows, too short for one {window_s:g} s window{after}")
            continue
        steps, lag_steps = horizon_steps(window_s, rows.dt), horizon_steps(LAG_HORIZON_S, rows.dt)
        for start in starts:
            scores = {WITHOUT: replayer.score(rows, start, replayer.replay(rows, start, steps), horizons)}
            if delta is not None:
                scores[WITH] = replayer.score(rows, start, replayer.replay(rows, start, steps, delta=delta), horizons)
                for extra in [FINETUNE] * finetune + [PHYSICS_RATE] * physics_rate:
                    trajectory = replayer.replay(rows, start, steps, delta=delta, semantics=extra)
                    scores[extra] = replayer.score(rows, start, trajectory, horizons)
            lag_error, lag_mpjpe = {}, {}
            for lag in LAGS:
                if lag == 0 and LAG_HORIZON_S in scores[WITHOUT].metrics:  # the replay above, its first 0.25 s
                    s = scores[WITHOUT]
                else:
                    s = replayer.score(rows, start, replayer.replay(rows, start, lag_steps, lag=lag), [LAG_HORIZON_S])
                lag_error[lag] = float(s.joint_error[LAG_HORIZON_S].mean())
                lag_mpjpe[lag] = s.metrics[LAG_HORIZON_S]["mpjpe_mm"]
            result.windows.append(WindowResult(rows.motion, rows.name, start, scores, lag_error, lag_mpjpe))
            if on_window is not None:
                on_window()
    result.clamps = clamp_share(recordings, sim)
    return result
