"""How faithful an open-loop replay is, one mismatch at a time, on a lock-step session.

A kick session runs lock-step (``asap-ros rollout``'s simulated G1, the project's controller and
wire format; :mod:`asap_ros.testing.lockstep_session`). Replayed from a tick's full MuJoCo state
with the recording's physics and the delivered LowCmds it is reproduced exactly; each mismatch
then shows alone: the pelvis 0.1 mm higher, the trainer simulator (ASAP's PD on the raw actions,
wrists held) at the recording's 500 Hz with the true velocities, the same at ASAP's 200 Hz, and
the reset from what the robot measures (gyro, stance-foot leg odometry).
"""

from __future__ import annotations

import numpy as np
import pytest

from asap_ros.export.openloop import MEASURED, RECORDED, OpenLoopReplayer, run_openloop
from asap_ros.export.trainer_sim import RUNTIME_TARGETS, TrainerSim
from asap_ros.testing.lockstep_session import LockstepSession, record_lockstep, replay_exact
from asap_ros.tracking.kinematics import KeypointModel
from asap_ros.tracking.metrics import e_g_mpjpe

WINDOW_TICKS = 50
"""1.0 s at the actor's 50 Hz."""
HALF = 25
EXACT_BOUND_M = 1e-4
"""The issue's bound on a full-state replay with the recording's physics at 1.0 s."""


@pytest.fixture(scope="module")
def session() -> LockstepSession:
    return record_lockstep("kick_level1", "nominal", stand_up_s=2.0)


@pytest.fixture(scope="module")
def keypoints() -> KeypointModel:
    return KeypointModel()


def replay_error_m(session: LockstepSession, keypoints: KeypointModel, start: int,
                   offset_m: np.ndarray | None = None) -> tuple[float, float]:  # fmt: skip
    """E_g-mpjpe (m) of a full-state replay from tick ``start`` at 0.5 s and 1.0 s."""
    end = start + WINDOW_TICKS + 1
    recorded = keypoints.keypoints(session.root_pos[start:end], session.root_quat_wxyz[start:end], session.q[start:end])
    replay = replay_exact(session, start, WINDOW_TICKS, offset_m)
    replayed = keypoints.keypoints(replay.root_pos, replay.root_quat_wxyz, replay.q)
    return e_g_mpjpe(replayed[: HALF + 1], recorded[: HALF + 1]), e_g_mpjpe(replayed, recorded)


def starts(session: LockstepSession) -> list[int]:
    """Ticks 0.5, 1.0 and 1.5 s into the motion (each with a whole window after it)."""
    tracked = session.tracked()
    return [int(tracked[n]) for n in (25, 50, 75)]


def test_full_state_replay_with_the_recordings_physics_reproduces_it(session, keypoints) -> None:
    assert session.tracking.sum() > 150, "the kick must have been tracked for over 3 s"
    for start in starts(session):
        half, whole = replay_error_m(session, keypoints, start)
        assert whole < EXACT_BOUND_M, (start, whole)
        assert half == whole == 0.0, "MuJoCo from the same state with the same commands is bit for bit the same"


def test_a_tenth_of_a_millimetre_of_pelvis_height_is_amplified(session, keypoints) -> None:
    """The open loop magnifies a reset error: 0.1 mm of pelvis height grows past 1 mm within 1 s."""
    for start in starts(session):
        _, whole = replay_error_m(session, keypoints, start, np.array([0.0, 0.0, 1e-4]))
        assert whole > 1e-3, (start, whole)


def floor_mm(session: LockstepSession, physics_hz: float, decimation: int, reset_velocity: str) -> np.ndarray:
    """Mean E_g-mpjpe (mm) at 0.5 s and 1.0 s of the trainer simulator's nominal replay (runtime targets)."""
    sim = TrainerSim(physics_hz, decimation, targets=RUNTIME_TARGETS)
    result = run_openloop([session.rows()], OpenLoopReplayer(sim, reset_velocity=reset_velocity), 1.0, 0.5)
    assert len(result.windows) >= 5
    return np.array([[w.scores["without"].metrics[h]["g_mpjpe_mm"] for h in (0.5, 1.0)]
                     for w in result.windows]).mean(axis=0)  # fmt: skip


def test_trainer_semantics_at_the_recordings_rate_replay_within_millimetres(session) -> None:
    """ASAP's PD on the raw actions, clipped as the runtime clips, wrists held, the reset to the rows'
    state and true velocities: 500 Hz (the recording's rate) stays within a few mm; 200 Hz x 4 (ASAP's)
    departs further (its integration differs from the recording's)."""
    at_500 = floor_mm(session, 500.0, 10, RECORDED)
    at_200 = floor_mm(session, 200.0, 4, RECORDED)
    assert at_500[1] < 5.0, at_500
    assert at_200[1] > 2 * at_500[1], (at_200, at_500)


def test_the_measured_reset_keeps_the_floor_within_the_acceptance(session) -> None:
    """Gyro angular velocity and stance-foot leg odometry instead of the true velocities: the floor
    stays within the issue's 8 mm at 0.5 s and 20 mm at 1.0 s (500 Hz replay of a simulated session)."""
    measured = floor_mm(session, 500.0, 10, MEASURED)
    assert measured[0] <= 8.0 and measured[1] <= 20.0, measured
