"""Resampling onto control ticks: interpolation, slerp, synchronisation error, velocity fit."""

from __future__ import annotations

import numpy as np

from asap_ros.core.quaternion import quat_from_yaw
from asap_ros.export.resample import bracket, continuous_hemisphere, interpolate, local_fit, slerp

MS = 1_000_000


def test_interpolation_and_sync_error():
    stamps = np.array([0, 10, 20, 30]) * MS
    values = np.array([[0.0], [1.0], [2.0], [4.0]])
    targets = np.array([0, 4, 15, 29, 40]) * MS
    where = bracket(stamps, targets)
    np.testing.assert_allclose(interpolate(where, values)[:, 0], [0.0, 0.4, 1.5, 3.8, 4.0])
    # time to the nearest sample; beyond the end: the distance to the last sample
    np.testing.assert_array_equal(where.sync_error_ns, np.array([0, 4, 5, 1, 10]) * MS)


def test_slerp_follows_a_constant_rotation_rate_across_the_sign_flip():
    stamps = np.array([0, 100]) * MS
    quats = quat_from_yaw(np.array([0.0, 1.0]))
    quats[1] *= -1  # same rotation, other hemisphere
    out = slerp(bracket(stamps, np.array([25, 50, 75]) * MS), quats)
    expected = quat_from_yaw(np.array([0.25, 0.5, 0.75]))
    np.testing.assert_allclose(np.abs(np.sum(out * expected, axis=1)), 1.0, atol=1e-12)
    flipped = continuous_hemisphere(np.array([[1.0, 0, 0, 0], [-1.0, 0, 0, 0], [1.0, 0, 0, 0]]))
    np.testing.assert_array_equal(flipped[:, 0], [1.0, 1.0, 1.0])


def test_local_fit_is_exact_for_constant_acceleration_off_grid():
    stamps = (np.arange(200) * 5 + 1.3) * MS  # 200 Hz samples off the target grid
    stamps = stamps.astype(np.int64)
    t = stamps / 1e9
    values = np.stack([3.0 + 0.5 * t - 2.0 * t**2, np.full_like(t, 7.0)], axis=1)
    targets = (np.arange(20, 900, 20) * MS).astype(np.int64)
    value, slope = local_fit(stamps, values, targets, 25 * MS)
    np.testing.assert_allclose(value[:, 0], 3.0 + 0.5 * targets / 1e9 - 2.0 * (targets / 1e9) ** 2, atol=1e-9)
    np.testing.assert_allclose(slope[:, 0], 0.5 - 4.0 * targets / 1e9, atol=1e-9)
    np.testing.assert_allclose(slope[:, 1], 0.0, atol=1e-9)


def test_local_fit_averages_noise():
    rng = np.random.default_rng(0)
    stamps = (np.arange(400) * 5 * MS).astype(np.int64)
    noisy = 0.3 * stamps / 1e9 + rng.normal(0.0, 0.0005, 400)
    targets = stamps[50:350:4] + 2 * MS
    _, fitted = local_fit(stamps, noisy, targets, 25 * MS)
    central = (noisy[52:352:4] - noisy[50:350:4]) / 0.01
    assert np.std(fitted - 0.3) < 0.3 * np.std(central - 0.3)
