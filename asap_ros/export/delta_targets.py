"""Per policy step, the Δa that makes the nominal trainer simulator follow the recorded next states.

For each transition (row f -> row f + 1, action of row f + 1, ASAP's pairing) the simulator is
reset to row f and ``Δa`` minimises ``|r(Δa)|² + λ|Δa|²``, ``r`` = simulated minus recorded state
after each of the next ``horizon`` policy steps (the rows' own actions, Δa held over them; a short
multiple-shooting fit, cut at the motion's end): the 23 joint angles (rad) and their velocities
times the policy period. One step alone (``horizon`` 1) makes a reset's jolt a target; over a few
the Δa that fits is the one the robot's defect keeps asking for. The pelvis is left out: no Δa
moves it directly, and its recorded state carries the motion capture's noise.
Gauss–Newton from Δa = 0, ``ITERATIONS`` steps on one Jacobian of 23 forward
differences (``FD_STEP`` in Δa units), all transitions of a batch stepped at once by
``mujoco.rollout`` (one MuJoCo data per thread).

Conditioning: per transition and joint, the resolution ``diag((JᵀJ + λI)⁻¹ JᵀJ)`` in [0, 1]: how
much of that joint's Δa the data fix (1) rather than the regulariser (0). A joint whose
torque is saturated, or whose motion barely moves the state in one step, has a low one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import mujoco
import numpy as np
from mujoco import rollout

from asap_ros.core.errors import ConfigError
from asap_ros.export.motion_rows import MotionRows
from asap_ros.export.openloop import OpenLoopReplayer, first_row
from asap_ros.tracking.kinematics import NUM_DRIVEN

ITERATIONS = 2
"""Gauss-Newton steps per transition, both on the Jacobian at Δa = 0 (the one-step response is
close to linear in Δa; a new Jacobian would cost 23 more rollouts)."""
FD_STEP = 0.1
"""Forward-difference step of the Jacobian, Δa units (0.025 rad of target)."""
REGULARISATION = 1e-4
"""λ of the per-step problem (rad²): a joint's Δa is determined when one unit of it moves the next
joint state by more than ``sqrt(λ)`` = 10 mrad. Smaller values fit contact noise: the recorded
state puts the feet a little off the simulated floor, and the low-gain ankles then take Δa of
several tenths of a radian that no model can predict."""
DETERMINED = 0.5
"""A joint's Δa counts as determined at a step when its resolution is at least this."""
BATCH_STEPS = 16
"""Transitions per rollout call (× 24 trajectories)."""
HORIZON_TICKS = 3
"""Policy steps each transition's Δa is fitted over (``delta fit --fit-ticks``): 60 ms at 50 Hz."""


@dataclass(frozen=True)
class DeltaTargets:
    """The fitted Δa of every transition of the recordings, with the model inputs they go with."""

    inputs: np.ndarray
    """(N, 108) float32 delta-model input at row f: the simulator reset to the recorded state,
    ``actions`` = the previous transition's target (0 at a motion's first row)."""
    targets: np.ndarray
    """(N, 23) fitted Δa (raw, unscaled)."""
    motions: np.ndarray
    """(N,) str, the motion of each transition (models are held out by motion)."""
    names: np.ndarray
    """(N,) str, the recording of each transition."""
    resolution: np.ndarray
    """(N, 23) per joint, see the module doc."""
    residual_before: np.ndarray
    residual_after: np.ndarray
    """(N,) |r| with Δa = 0 and with the fitted Δa."""

    def __len__(self) -> int:
        return len(self.targets)

    def select(self, keep: np.ndarray) -> DeltaTargets:
        return DeltaTargets(self.inputs[keep], self.targets[keep], self.motions[keep], self.names[keep],
                            self.resolution[keep], self.residual_before[keep], self.residual_after[keep])  # fmt: skip


class DeltaTargetFitter:
    """Gauss–Newton Δa per transition on a :class:`OpenLoopReplayer`'s simulator."""

    def __init__(self, replayer: OpenLoopReplayer, threads: int = 1, regularisation: float = REGULARISATION,
                 horizon: int = HORIZON_TICKS):  # fmt: skip
        if horizon < 1:
            raise ConfigError(None, "--fit-ticks", "must be at least 1", horizon)
        self.replayer = replayer
        self.sim = replayer.sim
        self.regularisation = regularisation
        self.horizon = int(horizon)
        self._datas = [mujoco.MjData(self.sim.model) for _ in range(max(1, threads))]
        self._probe = np.vstack([np.zeros(NUM_DRIVEN), FD_STEP * np.eye(NUM_DRIVEN)])  # (24, 23)

    def _next_state(self, rows: MotionRows, row: int) -> np.ndarray:
        """Recorded joint angles and velocities × the policy period of ``row`` (46,)."""
        _, _, dof_vel = self.replayer.velocities(rows)
        return np.concatenate([rows.dof[row], dof_vel[row] * self.sim.policy_dt])

    def _residuals(self, states: np.ndarray, goal: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(n, horizon·46) residuals of the states after each step (n, horizon, state) against the recorded
        joint states (n, horizon, 46), zero on the steps past the motion's end (``mask`` (n, horizon))."""
        sim = self.sim
        joint = [sim.driven_of_qpos(sim.qpos_of(states)), sim.driven_of_qvel(sim.qvel_of(states)) * sim.policy_dt]
        residual = (np.concatenate(joint, axis=-1) - goal) * mask[..., None]
        return residual.reshape(len(states), -1)

    def _step_residuals(self, start: np.ndarray, goal: np.ndarray, actions: np.ndarray, delta: np.ndarray,
                        mask: np.ndarray, batch: int) -> np.ndarray:  # fmt: skip
        """(batch, trajectories per transition, horizon·46) residuals over the horizon under ``actions + delta``
        (``actions`` (n, horizon, 23), ``delta`` (n, 23) held over it)."""
        ctrl = self.sim.targets(actions, np.broadcast_to(delta[:, None, :], actions.shape))
        return self._residuals(self._rollout(start, ctrl), goal, mask).reshape(batch, len(start) // batch, -1)

    def fit(self, recordings: Sequence[MotionRows], on_step: Callable[[int], None] | None = None,
            skip_start_s: float = 0.0) -> DeltaTargets:  # fmt: skip
        """Targets of every transition of ``recordings`` after their first ``skip_start_s`` (``on_step(n)``
        after each batch of n transitions)."""
        parts = []
        for rows in recordings:
            self.replayer.check_rate(rows)
            parts.append(self._fit_motion(rows, first_row(rows, skip_start_s), on_step))
        return DeltaTargets(*(np.concatenate([p[i] for p in parts]) for i in range(7)))

    def _fit_motion(self, rows: MotionRows, skip: int, on_step: Callable[[int], None] | None) -> tuple[np.ndarray, ...]:
        sim, lam = self.sim, self.regularisation
        count = len(rows) - 1
        inputs = np.zeros((count, 108), dtype=np.float32)
        targets = np.zeros((count, NUM_DRIVEN))
        resolution = np.zeros((count, NUM_DRIVEN))
        before, after = np.zeros(count), np.zeros(count)
        zero = np.zeros(NUM_DRIVEN, dtype=np.float32)
        skip = min(skip, count)
        ahead = np.arange(1, self.horizon + 1)
        for first in range(skip, count, BATCH_STEPS):
            batch = range(first, min(first + BATCH_STEPS, count))
            starts = []
            for f in batch:
                self.replayer.reset(rows, f)
                inputs[f] = sim.delta_observation(zero, rows.action[f + 1])
                starts.append(sim.state())
            reached = np.array(batch)[:, None] + ahead  # rows f + 1 .. f + horizon, cut at the last row
            mask_one = (reached <= count).astype(np.float64)
            reached = np.minimum(reached, count)
            goal_one = np.array([[self._next_state(rows, int(r)) for r in line] for line in reached])
            probes = len(self._probe)
            start = np.repeat(np.array(starts), probes, axis=0)
            goal, mask = np.repeat(goal_one, probes, axis=0), np.repeat(mask_one, probes, axis=0)
            actions_one = rows.action[reached].astype(np.float64)
            actions = np.repeat(actions_one, probes, axis=0)
            delta = np.zeros((len(batch), NUM_DRIVEN))
            r = self._step_residuals(start, goal, actions, np.tile(self._probe, (len(batch), 1)), mask, len(batch))
            before[list(batch)] = np.linalg.norm(r[:, 0], axis=1)
            jac = (r[:, 1:] - r[:, :1]).transpose(0, 2, 1) / FD_STEP  # (B, horizon·46, 23)
            jtj = jac.transpose(0, 2, 1) @ jac
            normal = jtj + lam * np.eye(NUM_DRIVEN)
            resolution[list(batch)] = np.diagonal(np.linalg.solve(normal, jtj), axis1=1, axis2=2)
            residual = r[:, 0]
            for _ in range(ITERATIONS):  # Gauss-Newton steps on the first Jacobian (chord method)
                gradient = np.einsum("bij,bi->bj", jac, residual) + lam * delta
                delta = delta - np.linalg.solve(normal, gradient[..., None])[..., 0]
                residual = self._step_residuals(start[::probes], goal_one, actions_one, delta, mask_one, len(batch))[:, 0]
            after[list(batch)] = np.linalg.norm(residual, axis=1)
            targets[list(batch)] = delta
            if on_step is not None:
                on_step(len(batch))
        inputs[1:, :NUM_DRIVEN] = targets[:-1]
        keep = slice(skip, count)
        inputs, targets, resolution, before, after = (a[keep] for a in (inputs, targets, resolution, before, after))
        count = len(targets)
        return (inputs, targets, np.full(count, rows.motion, dtype=object), np.full(count, rows.name, dtype=object),
                resolution, before, after)  # fmt: skip

    def _rollout(self, start: np.ndarray, ctrl: np.ndarray) -> np.ndarray:
        """(n, horizon, state) full-physics states after each policy step from each start under its
        controls ``ctrl`` (n, horizon, 29), each held for ``decimation`` physics steps."""
        nstep = self.sim.decimation
        control = np.ascontiguousarray(np.repeat(ctrl, nstep, axis=1))
        states, _ = rollout.rollout(self.sim.model, self._datas, start, control)
        return states[:, nstep - 1 :: nstep]

