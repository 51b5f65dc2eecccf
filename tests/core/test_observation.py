"""ObservationBuilder: history order and timing, term values, generic layouts, bad terms."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import yaml

from asap_ros.config.paths import policies_dir
from asap_ros.config.policy_spec import load_policy_spec
from asap_ros.core.errors import ConfigError
from asap_ros.core.observation import TERMS, ObservationBuilder
from asap_ros.core.policy_spec import HistorySpec, ObsTerm
from asap_ros.core.state import RobotState


@pytest.fixture(scope="module")
def spec():
    return load_policy_spec(policies_dir() / "CR7_level1.yaml")


def state_for_step(k: int) -> RobotState:
    """A state whose every value encodes the step number k."""
    state = RobotState()
    state.q = np.full(29, 0.01 * k)
    state.dq = np.arange(29) + 100.0 * k
    state.gyro = np.array([1.0, 2.0, 3.0]) * k
    return state


def test_history_is_zero_after_reset_and_pushed_after_build(spec):
    builder = ObservationBuilder(spec)
    first = builder.build(state_for_step(1), np.full(23, 0.5, dtype=np.float32), 0.1).copy()
    np.testing.assert_array_equal(first[72:376], 0.0)
    second = builder.build(state_for_step(2), np.full(23, 0.7, dtype=np.float32), 0.2)
    # history_actor starts with actions [t-1 .. t-4]: t-1 is the first step's actions term
    np.testing.assert_array_equal(second[72 : 72 + 23], first[0:23])
    np.testing.assert_array_equal(second[72 + 23 : 72 + 92], 0.0)
    builder.reset()
    again = builder.build(state_for_step(1), np.full(23, 0.5, dtype=np.float32), 0.1)
    np.testing.assert_array_equal(again, first)


def test_history_is_newest_first_per_term_and_scaled(spec):
    builder = ObservationBuilder(spec)
    action = np.zeros(23, dtype=np.float32)
    for k in range(1, 7):
        obs = builder.build(state_for_step(k), action, 0.1 * k)
    # after 6 steps the last observation (k = 6) holds steps 5, 4, 3, 2
    gyro_block = obs[72 + 92 : 72 + 92 + 12].reshape(4, 3)
    expected = np.array([[1.0, 2.0, 3.0]]) * np.array([[5], [4], [3], [2]]) * 0.25
    np.testing.assert_array_equal(gyro_block, expected.astype(np.float32))
    phase_block = obs[72 + 300 : 72 + 304]
    np.testing.assert_array_equal(phase_block, np.float32([0.5, 0.4, 0.3, 0.2]))
    dof_vel_block = obs[72 + 104 + 92 : 72 + 104 + 184].reshape(4, 23)
    np.testing.assert_allclose(dof_vel_block[0], (spec.driven_indices + 500.0) * 0.05, rtol=1e-7)


def test_oldest_first_history(spec):
    history = dataclasses.replace(spec.history, newest_first=False)
    builder = ObservationBuilder(dataclasses.replace(spec, history=history))
    for k in range(1, 7):
        obs = builder.build(state_for_step(k), np.zeros(23, dtype=np.float32), 0.1 * k)
    np.testing.assert_array_equal(obs[72 + 300 : 72 + 304], np.float32([0.2, 0.3, 0.4, 0.5]))


def test_current_terms(spec):
    builder = ObservationBuilder(spec)
    state = RobotState()
    state.q = spec.default_q + np.linspace(-0.2, 0.2, 29)
    state.dq = np.linspace(-3, 3, 29)
    state.gyro = np.array([0.4, -0.8, 1.2])
    half_turn = np.pi / 4  # 90 degrees about x: body z axis points along world -y
    state.quat_wxyz = np.array([np.cos(half_turn), np.sin(half_turn), 0.0, 0.0])
    action = np.linspace(-1, 1, 23).astype(np.float32)
    obs = builder.build(state, action, 0.25)
    np.testing.assert_array_equal(obs[0:23], action)
    np.testing.assert_allclose(obs[23:26], [0.1, -0.2, 0.3], rtol=1e-7)
    np.testing.assert_allclose(obs[26:49], np.linspace(-0.2, 0.2, 29)[spec.driven_indices], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(obs[49:72], np.linspace(-3, 3, 29)[spec.driven_indices] * 0.05, rtol=1e-6)
    np.testing.assert_allclose(obs[376:379], [0.0, -1.0, 0.0], atol=1e-7)
    assert obs[379] == 0.25
    assert obs.dtype == np.float32 and obs is builder.obs


def test_a_different_layout_is_just_a_spec(spec):
    """No history, other scales, fewer terms: only the spec changes."""
    terms = (ObsTerm("base_ang_vel", 3, 2.0), ObsTerm("dof_vel", 23, 0.1), ObsTerm("projected_gravity", 3, 1.0))
    custom = dataclasses.replace(spec, terms=terms, history=None, input_dim=29)
    builder = ObservationBuilder(custom)
    state = state_for_step(1)
    obs = builder.build(state, np.zeros(23, dtype=np.float32), 0.0)
    np.testing.assert_array_equal(obs[0:3], np.float32([2.0, 4.0, 6.0]))
    np.testing.assert_allclose(obs[3:26], (spec.driven_indices + 100.0) * 0.1, rtol=1e-7)
    np.testing.assert_array_equal(obs[26:29], np.float32([0, 0, -1]))
    short = dataclasses.replace(
        custom, history=HistorySpec("hist", 2, ("base_ang_vel",), True), input_dim=35
    )
    builder = ObservationBuilder(short)
    builder.build(state_for_step(1), np.zeros(23, dtype=np.float32), 0.0)
    obs = builder.build(state_for_step(2), np.zeros(23, dtype=np.float32), 0.0)
    assert [s.name for s in short.layout] == ["base_ang_vel", "dof_vel", "hist", "projected_gravity"]
    np.testing.assert_array_equal(obs[26:32], np.float32([2.0, 4.0, 6.0, 0.0, 0.0, 0.0]))


def test_unknown_term_names_spec_and_key(tmp_path):
    data = yaml.safe_load((policies_dir() / "CR7_level1.yaml").read_text())
    data["observation"]["terms"]["base_lin_vel"] = {"dim": 3, "scale": 2.0}
    data["actor"]["input"]["dim"] = 383
    path = tmp_path / "lin.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"lin\.yaml: observation\.terms\.base_lin_vel: unknown observation term"):
        ObservationBuilder(load_policy_spec(path))


def test_term_dim_must_fit_the_driven_joints(tmp_path):
    data = yaml.safe_load((policies_dir() / "CR7_level1.yaml").read_text())
    data["observation"]["terms"]["dof_pos"]["dim"] = 29
    data["actor"]["input"]["dim"] = 386 + 24  # current term and its 4 history steps
    path = tmp_path / "dim.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"dim\.yaml: observation\.terms\.dof_pos\.dim: must be 23 for 23 driven, 23 observed and 0 reference joints \(got 29\)"):
        ObservationBuilder(load_policy_spec(path))


def test_registry_names():
    assert set(TERMS) >= {"actions", "base_ang_vel", "dof_pos", "dof_vel", "projected_gravity", "ref_motion_phase"}
