"""The gap ranking: early divergence from resets every ranking horizon, windows for the rest."""

from __future__ import annotations

import numpy as np
import pytest

from asap_ros.export.gap import (
    RANK_HORIZON_S,
    STANDS_OUT_MIN_RAD,
    STANDS_OUT_RATIO,
    TRIM_SHARE,
    EpisodeGap,
    WindowReplay,
    episode_windows,
    rank_joints,
    trimmed_rms,
)

JOINTS = [f"j{i}" for i in range(29)]
STEP_S = 0.002


def replay(start_s: float, length_s: float, error: np.ndarray) -> WindowReplay:
    """A replay whose divergence is ``error`` (29,) rad at every sample after the reset."""
    times = np.arange(0.0, length_s + STEP_S / 2, STEP_S)
    recorded = np.zeros((len(times), 29))
    return WindowReplay(int(start_s * 1e9), times, recorded, recorded + error, "stance")


def test_resets_every_horizon_tile_the_episode():
    ticks = np.arange(0, 3_000_000_000 + 1, 2_000_000)
    early = episode_windows(ticks, RANK_HORIZON_S)
    assert len(early) == 15 and early[0] == (0, 200_000_000) and early[-1][1] == 3_000_000_000
    assert all(a[1] == b[0] for a, b in zip(early, early[1:]))  # each ends where the next begins
    windows = episode_windows(ticks, 1.0)
    assert [w[0] for w in windows] == [e[0] for e in early[::5]]  # a window starts with the reset there


def test_each_joint_leaves_out_its_worst_share_of_the_resets():
    base = np.full(29, 0.002)
    left_out = int(15 * TRIM_SHARE)
    assert left_out == 2  # of 15 resets: a 3 s kick after the band drop
    errors = [np.tile(base, (101, 1)) for _ in range(15)]
    for k in (7, 8):  # a foot landing in two resets in a row, joint 3 only
        errors[k] = errors[k].copy()
        errors[k][:, 3] = 0.050
    assert trimmed_rms(errors) == pytest.approx(base)
    errors[9] = errors[8]  # a third: it stays
    assert trimmed_rms(errors)[3] == pytest.approx(np.sqrt((0.050**2 + 12 * 0.002**2) / 13))
    few = errors[:2] + errors[7:9]
    assert int(len(few) * TRIM_SHARE) == 0 and trimmed_rms(few)[3] == pytest.approx(np.sqrt((2 * 0.050**2 + 2 * 0.002**2) / 4))


def test_a_joint_wrong_wherever_it_is_loaded_stands_out_and_a_landing_does_not():
    base = np.full(29, 0.002)
    error = [base.copy() for _ in range(15)]
    for k in range(15):
        if k in (7, 8):
            error[k][3] = 0.080  # the landing
        if k < 3 or k >= 9:
            error[k][5] = 3 * STANDS_OUT_MIN_RAD  # loaded in 9 resets of 15, as a weak knee in a kick
    resets = [replay(0.2 * k, RANK_HORIZON_S, error[k]) for k in range(15)]
    windows = [replay(float(k), 1.0, base) for k in range(3)]
    rows = rank_joints(resets, windows, JOINTS)
    assert rows[0].joint == "j5" and rows[0].stands_out and rows[0].ratio_to_median > STANDS_OUT_RATIO
    expected = np.sqrt((7 * (3 * STANDS_OUT_MIN_RAD) ** 2 + 6 * 0.002**2) / 13)  # its 2 worst left out
    assert rows[0].early_rms_rad == pytest.approx(expected, rel=1e-9)
    assert rows[0].window_rms_rad == pytest.approx(0.002) and rows[0].end_error_rad == pytest.approx(0.002)
    assert all(not r.stands_out for r in rows[1:]) and rows[1].early_rms_rad == pytest.approx(0.002)


def test_an_episode_ranks_its_own_resets():
    error = np.zeros(29)
    error[5] = 0.03
    episode = EpisodeGap("ep001_kick", "completed", False, (replay(0.0, 1.0, np.full(29, 0.001)),),
                         (replay(0.0, RANK_HORIZON_S, error + 0.001),))  # fmt: skip
    rows = episode.ranking(JOINTS, RANK_HORIZON_S)  # one reset: nothing left out
    assert rows[0].joint == "j5" and rows[0].early_rms_rad == pytest.approx(0.031)
    assert rows[0].window_rms_rad == pytest.approx(0.001)
