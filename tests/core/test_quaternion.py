"""The one quaternion implementation: products, rotations, rotation vectors, rotation matrices, Euler angles, rates."""

from __future__ import annotations

import math

import numpy as np
import pytest

from asap_ros.core.quaternion import (
    body_rates,
    matrix_to_quat_wxyz,
    quat_conjugate,
    quat_from_rotvec,
    quat_from_yaw,
    quat_multiply,
    quat_rotate,
    quat_to_rotvec,
    quat_wxyz_matrix,
    rpy_from_quat,
)


def test_rotvec_round_trip_and_small_angles() -> None:
    rng = np.random.default_rng(1)
    rotvecs = rng.normal(0.0, 1.0, (50, 3))
    rotvecs *= np.minimum(1.0, 3.0 / np.linalg.norm(rotvecs, axis=1, keepdims=True))  # angles below pi
    quats = quat_from_rotvec(rotvecs)
    np.testing.assert_allclose(np.linalg.norm(quats, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(quat_to_rotvec(quats), rotvecs, atol=1e-12)
    np.testing.assert_array_equal(quat_from_rotvec(np.zeros(3)), [1.0, 0.0, 0.0, 0.0])


def test_product_composes_rotations_and_single_equals_batched() -> None:
    a, b = quat_from_rotvec(np.array([0.3, -0.2, 0.9])), quat_from_yaw(0.7)
    v = np.array([0.1, 2.0, -0.5])
    np.testing.assert_allclose(quat_rotate(quat_multiply(a, b), v), quat_rotate(a, quat_rotate(b, v)), atol=1e-12)
    np.testing.assert_allclose(quat_rotate(quat_multiply(a, quat_conjugate(a)), v), v, atol=1e-12)
    np.testing.assert_array_equal(quat_multiply(np.stack([a, b]), np.stack([b, a]))[0], quat_multiply(a, b))


def test_rpy_of_known_rotations() -> None:
    np.testing.assert_allclose(rpy_from_quat(quat_from_yaw(0.5)), (0.0, 0.0, 0.5), atol=1e-12)
    roll = quat_from_rotvec(np.array([0.25, 0.0, 0.0]))
    np.testing.assert_allclose(rpy_from_quat(roll), (0.25, 0.0, 0.0), atol=1e-12)
    pitch = quat_from_rotvec(np.array([0.0, -math.pi / 3, 0.0]))
    np.testing.assert_allclose(rpy_from_quat(pitch), (0.0, -math.pi / 3, 0.0), atol=1e-12)


def test_body_rates_of_a_constant_spin_in_a_tilted_body() -> None:
    fps, omega_body = 50.0, np.array([0.2, -0.4, 1.1])
    tilt = quat_from_rotvec(np.array([0.3, 0.1, 0.0]))
    steps = quat_from_rotvec(np.outer(np.arange(20) / fps, omega_body))  # body frame: q_k = tilt * exp(k w dt)
    rates = body_rates(quat_multiply(tilt, steps), fps)
    assert rates.shape == (19, 3)
    np.testing.assert_allclose(rates, np.tile(omega_body, (19, 1)), rtol=1e-3)


def test_quaternion_conversions_round_trip():
    rng = np.random.default_rng(0)
    for quat in rng.normal(size=(50, 4)):
        quat /= np.linalg.norm(quat)
        quat *= np.sign(quat[0])
        assert matrix_to_quat_wxyz(quat_wxyz_matrix(quat)) == pytest.approx(quat, abs=1e-9)
