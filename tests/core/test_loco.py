"""ASAP's standing actor (dec_loco) in HOLD: its spec, observation, physics and controller logic.

The observation is checked against a reimplementation written from ASAP's deploy code
(``MotionTrackingDecLocoHeightPolicy.prepare_obs_for_rl``: terms in alphabetical order, a
history handler per term, newest first, pushed after the observation) that shares no code with
the builder. Standing is checked in MuJoCo (the simulated G1 of ``asap-ros rollout``, no band).
The controller-logic tests feed a stand-in LowState stream whose joints follow the targets
(no G1 here); the actor is the real ONNX model everywhere.
"""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import onnxruntime as ort
import pytest
import yaml

from asap_ros.commands.rollout import LockstepG1
from asap_ros.config.controller import load_controller_config
from asap_ros.config.paths import config_file, policies_dir
from asap_ros.config.policy_spec import load_policy_spec
from asap_ros.config.robot import load_robot_model
from asap_ros.core.controller import Controller, ControllerConfig, Mode, Stand, Start, StepOutput, Stop
from asap_ros.core.errors import ConfigError
from asap_ros.core.observation import ObservationBuilder
from asap_ros.core.policy import PolicyRunner
from asap_ros.core.policy_spec import PolicySpec
from asap_ros.core.robot import RobotModel
from asap_ros.core.state import NUM_MOTORS, JointCommand, RobotState
from asap_ros.runtime.policies import build_controller, load_policy_runner
from asap_ros.testing.actors import corrupted_runner

STAND_SPEC = policies_dir() / "dec_loco_stand.yaml"
MOTION = "kick_level1"
T0 = 1_700_000_000_000_000_000
DT = 0.02
LEGS = slice(0, 12)
UPPER = slice(12, 29)
WAIST_ROLL_PITCH = [13, 14]
HISTORY = slice(79, 479)  # history_loco in the 500-float observation
REF_UPPER = slice(482, 499)  # ref_upper_dof_pos


@pytest.fixture(scope="module")
def robot() -> RobotModel:
    return load_robot_model()


@pytest.fixture(scope="module")
def spec(robot: RobotModel) -> PolicySpec:
    return load_policy_spec(STAND_SPEC, robot)


@pytest.fixture(scope="module")
def deploy(assets) -> dict:
    """ASAP's deploy configuration (config/g1_29dof_hist.yaml of the assets)."""
    return yaml.safe_load((assets / "config" / "g1_29dof_hist.yaml").read_text())


# --- the spec ---------------------------------------------------------------------------------


def test_spec_matches_asap_deploy_config(spec: PolicySpec, robot: RobotModel, deploy: dict) -> None:
    history = deploy["history_loco_height_config"]  # the height-conditioned actor: 100 floats per step
    assert spec.history.name == "history_loco" and spec.history.newest_first
    assert spec.history.terms == tuple(sorted(history)) and set(history.values()) == {spec.history.length}
    assert {t.name for t in spec.terms} == set(history)
    for term in spec.terms:
        assert (term.dim, term.scale) == (deploy["obs_loco_dims"][term.name], deploy["obs_scales"][term.name]), term
    assert [(s.name, s.offset, s.dim) for s in spec.layout] == [
        ("actions", 0, 12), ("base_ang_vel", 12, 3), ("command_ang_vel", 15, 1), ("command_base_height", 16, 1),
        ("command_lin_vel", 17, 2), ("command_stand", 19, 1), ("cos_phase", 20, 1), ("dof_pos", 21, 29),
        ("dof_vel", 50, 29), ("history_loco", 79, 400), ("projected_gravity", 479, 3),
        ("ref_upper_dof_pos", 482, 17), ("sin_phase", 499, 1),
    ]  # fmt: skip
    assert (spec.input_dim, spec.output_dim, spec.action_scale, spec.action_clip) == (500, 12, 0.25, 100.0)
    assert spec.driven_joints == robot.group("legs") and spec.observed_joints == robot.joint_names
    assert spec.reference_joints == robot.group("upper_body")
    np.testing.assert_array_equal(spec.prepare_pose[UPPER], deploy["loco_upper_body_dof_pos"])
    np.testing.assert_array_equal(spec.prepare_pose[LEGS], robot.default_q[LEGS])
    np.testing.assert_array_equal(spec.snap_indices, WAIST_ROLL_PITCH)
    commands = spec.commands
    assert (commands.lin_vel, commands.ang_vel, commands.stand, commands.base_height) == ((0.0, 0.0), 0.0, 0.0, 0.78)
    assert not spec.is_motion and spec.clip_path is None and spec.clip_duration_s == math.inf


def _stand_data() -> dict:
    return yaml.safe_load(STAND_SPEC.read_text())


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["commands"].update(stand=1.0), r"commands\.stand: must be 0 \(stance\).*\(got 1\.0\)"),
        (lambda d: d["commands"].pop("base_height"), r"commands\.base_height: required key missing"),
        (lambda d: d["reference"].update(snap_joints=["left_knee_joint"]),
         r"reference\.snap_joints: not one of the reference pose_joints \(got 'left_knee_joint'\)"),
        (lambda d: d["reference"].update(pose=[0.0] * 16), r"reference\.pose: must have 17 entries, has 16"),
        (lambda d: d.update(observed_joints=["left_hip_pitch_joint", "tail_joint"]),
         r"observed_joints: unknown joint name \(got 'tail_joint'\)"),
        (lambda d: d.update(prepare={"blend_s": 1.0}), r"prepare: only a motion-tracking actor \(with phase\.clip\) has this"),
        (lambda d: d["phase"].update(start=0.1), r"phase\.start: only a motion-tracking actor"),
    ],
    ids=["walking", "missing command", "snap not in reference", "short pose", "unknown joint", "prepare", "phase start"],
)  # fmt: skip
def test_bad_standing_spec_names_file_key_value(tmp_path, robot, edit, message: str) -> None:
    data = _stand_data()
    edit(data)
    path = tmp_path / "stand.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=rf"stand\.yaml: {message}"):
        load_policy_spec(path, robot)


@pytest.mark.parametrize(
    ("edit", "term", "message"),
    [(lambda d: d.pop("commands"), "command_ang_vel", "needs the spec's commands section"),
     (lambda d: d.pop("reference"), "ref_upper_dof_pos", "needs the spec's reference section"),
     (lambda d: d.update(observed_joints="legs"), "dof_pos.dim",
      r"must be 12 for 12 driven, 12 observed and 17 reference joints \(got 29\)")],
    ids=["no commands", "no reference", "12 observed joints"],
)  # fmt: skip
def test_terms_must_fit_the_spec(tmp_path, robot, edit, term: str, message: str) -> None:
    data = _stand_data()
    edit(data)
    path = tmp_path / "stand.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=rf"stand\.yaml: observation\.terms\.{re.escape(term)}: {message}"):
        ObservationBuilder(load_policy_spec(path, robot))


# --- the observation, against ASAP's deploy code ------------------------------------------------


def quat_rotate_inverse(q_wxyz: np.ndarray, v: np.ndarray) -> np.ndarray:
    """ASAP's ``quat_rotate_inverse_numpy`` for one quaternion (w, x, y, z)."""
    w, u = q_wxyz[0], q_wxyz[1:]
    return v * (2.0 * w * w - 1.0) - np.cross(u, v) * w * 2.0 + u * np.dot(u, v) * 2.0


class DeployLocoObservation:
    """``prepare_obs_for_rl`` of ASAP's dec_loco height policy while standing, from its source.

    Commands are BasePolicy's start values (zero velocity, stand 0, base height 0.78); the gait
    phase is ``(t * stand) % period / period`` = 0. The history handler keeps, per key, the
    last four scaled values newest first and is updated after the observation is built.
    """

    DIMS = {"actions": 12, "base_ang_vel": 3, "command_ang_vel": 1, "command_base_height": 1, "command_lin_vel": 2,
            "command_stand": 1, "cos_phase": 1, "dof_pos": 29, "dof_vel": 29, "projected_gravity": 3,
            "ref_upper_dof_pos": 17, "sin_phase": 1}  # fmt: skip

    def __init__(self, default_q: np.ndarray):
        self.default_q = default_q
        self.history = {key: np.zeros((4, dim)) for key, dim in self.DIMS.items()}

    def __call__(self, q, dq, quat_wxyz, gyro, last_action, ref_upper) -> np.ndarray:
        phase_time = 0.0
        current = {
            "actions": last_action,
            "base_ang_vel": gyro * 0.25,
            "command_ang_vel": np.zeros(1),
            "command_base_height": np.array([0.78]) * 2.0,
            "command_lin_vel": np.zeros(2),
            "command_stand": np.zeros(1),
            "cos_phase": np.array([np.cos(2 * np.pi * phase_time)]),
            "dof_pos": q - self.default_q,
            "dof_vel": dq * 0.05,
            "projected_gravity": quat_rotate_inverse(quat_wxyz, np.array([0.0, 0.0, -1.0])),
            "ref_upper_dof_pos": ref_upper,
            "sin_phase": np.array([np.sin(2 * np.pi * phase_time)]),
        }
        blocks = dict(current, history_loco=np.concatenate([self.history[key].reshape(-1) for key in sorted(self.history)]))
        obs = np.concatenate([blocks[key] for key in sorted(blocks)])
        for key in self.history:
            self.history[key] = np.roll(self.history[key], 1, axis=0)
            self.history[key][0] = current[key]
        return obs.astype(np.float32)


def test_observation_and_targets_match_asap_deploy_code_on_mujoco_states(spec, robot, assets) -> None:
    """100 steps on the ground without band, the upper-body reference moving as in a blend."""
    runner = load_policy_runner(STAND_SPEC, robot)
    session = ort.InferenceSession(str(assets / "policies/dec_loco/model_6600.onnx"), providers=["CPUExecutionProvider"])
    g1 = LockstepG1("nominal")
    g1.band("band_release")
    expected_obs = DeployLocoObservation(robot.default_q)
    last_action = np.zeros(12)
    for k in range(100):
        state = g1.read_state()
        reference = robot.default_q + min(k / 50, 1.0) * (runner.start_pose - robot.default_q)
        out = runner.step(state, reference)
        expected = expected_obs(state.q, state.dq, state.quat_wxyz, state.gyro, last_action, reference[UPPER])
        np.testing.assert_allclose(out.obs, expected, rtol=1e-6, atol=1e-7, err_msg=f"step {k}")
        action = np.clip(session.run(None, {"actor_obs": expected[None]})[0][0], -100, 100)
        np.testing.assert_allclose(out.raw_action, action, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out.q_target[LEGS], 0.25 * out.raw_action + robot.default_q[LEGS], rtol=1e-6)
        np.testing.assert_array_equal(out.q_target[UPPER], reference[UPPER])
        assert (out.tick, out.phase, out.done) == (k, 0.0, False)
        last_action = out.raw_action
        g1.command(_pd(out.q_target, runner))
        g1.advance()
    assert np.count_nonzero(out.obs[HISTORY]) > 300


def _pd(q: np.ndarray, runner: PolicyRunner) -> JointCommand:
    zeros = np.zeros(NUM_MOTORS)
    return JointCommand(q=q, dq=zeros, tau=zeros, kp=runner.kp, kd=runner.kd, enabled=np.ones(NUM_MOTORS, dtype=bool))


# --- standing in MuJoCo, through the controller -----------------------------------------------


def _tilt_deg(quat_wxyz: np.ndarray) -> float:
    w, x, y, z = quat_wxyz
    return math.degrees(math.acos(max(-1.0, min(1.0, 1.0 - 2.0 * (x * x + y * y)))))


def _stand_then_release(robot: RobotModel, config: ControllerConfig, seconds: float) -> tuple[list[StepOutput], dict]:
    """As ``asap-ros rollout`` does: stand up (1 s) on the band, release it at the first HOLD step.

    The G1 starts in the default pose, feet on the floor, the band carrying its weight.
    Figures are over the HOLD that follows (``seconds`` long, or until DAMPING).
    """
    g1 = LockstepG1("nominal")
    controller = build_controller(robot, {}, dataclasses.replace(config, stand_up_duration_s=1.0))
    outputs: list[StepOutput] = []
    lowest, tilt, start_xy = math.inf, 0.0, None
    for k in range(round((1.04 + seconds) / DT)):
        if k == 1:
            controller.request(Stand(), g1.now_ns)
        out = controller.step(g1.read_state(), g1.now_ns)
        outputs.append(out)
        if out.mode is Mode.HOLD and start_xy is None:
            g1.band("band_release")
            start_xy = g1.physics.pelvis_pos()[:2]
        g1.command(out.command)
        g1.advance()
        if start_xy is not None:
            lowest = min(lowest, g1.physics.pelvis_pos()[2])
            tilt = max(tilt, _tilt_deg(g1.physics.pelvis_quat_wxyz()))
        if out.mode is Mode.DAMPING:
            break
    drift = float(np.linalg.norm(g1.physics.pelvis_pos()[:2] - start_xy))
    return outputs, {"lowest_m": lowest, "max_tilt_deg": tilt, "drift_m": drift}


def test_standing_actor_keeps_the_g1_up_for_20_s_without_band(robot) -> None:
    outputs, figures = _stand_then_release(robot, load_controller_config(), seconds=20.0)
    hold = [o for o in outputs if o.mode is Mode.HOLD][1:]  # the first: the step that finished STAND_UP
    assert outputs[-1].mode is Mode.HOLD and len(hold) * DT >= 20.0, figures
    assert all(o.hold_policy is not None and o.policy is None for o in hold)
    assert figures["lowest_m"] > 0.70 and figures["max_tilt_deg"] < 8.0 and figures["drift_m"] < 0.1, figures


def test_pd_hold_with_deploy_gains_falls_without_band(robot) -> None:
    """The fallback (no hold policy) cannot balance the G1: a tilt fault within 2 s of the release."""
    config = dataclasses.replace(load_controller_config(), hold_policy=None)
    outputs, figures = _stand_then_release(robot, config, seconds=3.0)
    assert outputs[-1].mode is Mode.DAMPING and "torso tilt" in outputs[-1].fault, figures
    assert sum(o.mode is Mode.HOLD for o in outputs) * DT < 2.0
    assert all(o.hold_policy is None for o in outputs)


# --- controller logic (stand-in LowState stream, real actors) ---------------------------------


class Rig:
    """Test double for the G1's LowState stream: joints follow the commanded targets exactly."""

    def __init__(self, controller: Controller):
        self.controller = controller
        self.now = T0
        self.q = np.linspace(-0.05, 0.05, NUM_MOTORS)
        self.outputs: list[StepOutput] = []

    def step(self, seconds: float = DT, tilt_deg: float = 0.0) -> StepOutput:
        for _ in range(max(1, round(seconds / DT))):
            self.now += int(DT * 1e9)
            half = math.radians(tilt_deg) / 2
            state = RobotState(stamp_ns=self.now - 1_000_000, arrival_ns=self.now - 1_000_000, q=self.q.copy(),
                               tick=self.now // 2_000_000, temperature=np.full(NUM_MOTORS, 40.0),
                               quat_wxyz=np.array([math.cos(half), 0.0, math.sin(half), 0.0]))  # fmt: skip
            out = self.controller.step(state, self.now)
            if out.mode is not Mode.DAMPING:
                self.q = out.command.q.copy()
            self.outputs.append(out)
        return out

    def request(self, req) -> None:
        self.controller.request(req, self.now)

    def to_hold(self) -> StepOutput:
        self.step()
        self.request(Stand())
        return self.step(self.controller.config.stand_up_duration_s + DT)


@pytest.fixture(scope="module")
def config() -> ControllerConfig:
    return dataclasses.replace(load_controller_config(), stand_up_duration_s=1.0)


@pytest.fixture(scope="module")
def motion(robot) -> PolicyRunner:
    return load_policy_runner(policies_dir() / f"{MOTION}.yaml", robot)


@pytest.fixture
def rig(robot, config, motion) -> Rig:
    return Rig(build_controller(robot, {MOTION: motion}, config))


def test_hold_runs_the_actor_on_the_legs_and_blends_the_upper_body_in(rig: Rig, robot, config) -> None:
    rig.to_hold()
    stand = rig.controller.hold_policy
    assert rig.controller.mode is Mode.HOLD and stand.spec.name == "dec_loco_stand"
    first = next(o for o in rig.outputs if o.hold_policy is not None)
    np.testing.assert_array_equal(first.hold_policy.obs[HISTORY], 0.0)  # reset when HOLD is entered
    out = rig.step(config.return_blend_s / 2 - DT)
    assert out.policy is None and out.hold_policy is not None
    np.testing.assert_array_equal(out.command.q[LEGS], out.hold_policy.q_target[LEGS])
    halfway = (robot.default_q + stand.start_pose) / 2
    np.testing.assert_allclose(out.command.q[UPPER], halfway[UPPER], atol=1e-12)
    np.testing.assert_allclose(out.hold_policy.obs[REF_UPPER], halfway[UPPER], rtol=1e-6)  # the actor sees the blend
    np.testing.assert_array_equal(out.command.kp, stand.kp)
    out = rig.step(config.return_blend_s)
    np.testing.assert_allclose(out.command.q[UPPER], stand.start_pose[UPPER])
    assert out.mode is Mode.HOLD and out.hold_policy.tick == sum(o.hold_policy is not None for o in rig.outputs) - 1


def test_prepare_keeps_the_actor_on_the_legs_then_the_motion_actor_takes_over(rig: Rig, motion) -> None:
    rig.to_hold()
    rig.step(2.0)
    rig.request(Start(MOTION))
    out = rig.step(motion.spec.prepare_blend_s)
    assert out.mode is Mode.PREPARE and out.policy is None and out.hold_policy is not None
    assert out.hold_policy.obs[HISTORY].any()  # not reset: the actor kept standing since HOLD
    np.testing.assert_array_equal(out.command.q[LEGS], out.hold_policy.q_target[LEGS])
    np.testing.assert_allclose(out.command.q[UPPER], motion.start_pose[UPPER])
    np.testing.assert_allclose(out.hold_policy.obs[REF_UPPER], motion.start_pose[UPPER], rtol=1e-6)
    out = rig.step(motion.spec.prepare_hold_s)
    assert out.mode is Mode.TRACKING and out.policy.tick == 0 and out.hold_policy is None


def test_after_the_motion_waist_roll_pitch_snap_and_the_history_restarts(rig: Rig, motion, config) -> None:
    rig.to_hold()
    rig.request(Start(MOTION))
    rig.step(motion.spec.prepare_blend_s + motion.spec.prepare_hold_s)
    last_motion = rig.step()
    while not last_motion.policy.done:
        last_motion = rig.step()
    assert last_motion.mode is Mode.HOLD  # the motion's last targets go out in the step that ends it
    out = rig.step()
    assert out.mode is Mode.HOLD and out.hold_policy is not None and out.policy is None
    np.testing.assert_array_equal(out.hold_policy.obs[HISTORY], 0.0)
    stand = rig.controller.hold_policy
    expected = last_motion.command.q + DT / config.return_blend_s * (stand.start_pose - last_motion.command.q)
    expected[WAIST_ROLL_PITCH] = 0.0  # set at once, as ASAP does, not blended
    assert np.abs(last_motion.command.q[WAIST_ROLL_PITCH]).max() > 0.05
    np.testing.assert_allclose(out.command.q[UPPER], expected[UPPER], atol=1e-12)


def test_stop_in_prepare_keeps_the_actor_running(rig: Rig) -> None:
    rig.to_hold()
    rig.request(Start(MOTION))
    before = rig.step(0.5)
    rig.request(Stop())
    out = rig.step()
    assert out.mode is Mode.HOLD and out.hold_policy.tick == before.hold_policy.tick + 1
    assert out.hold_policy.obs[HISTORY].any()


@pytest.mark.parametrize(
    ("index", "value", "reason"),
    [(2, np.inf, "hold policy dec_loco_stand: actor output[2] (left_hip_yaw_joint) is inf"),
     (3, 20.0, "HOLD: target of left_knee_joint jumps "),
     (0, FloatingPointError("actor diverged"),
      "hold policy dec_loco_stand step failed: FloatingPointError('actor diverged')")],
    ids=["inf", "target jump", "raise"],
)  # fmt: skip
def test_standing_actor_output_fault_latches_damping(robot, config, motion, index, value, reason: str) -> None:
    """inf, a raw output inside the clip that throws the knee target to its limit (20 -> 2.88 rad),
    an exception: each latches DAMPING in HOLD."""
    standing = corrupted_runner(load_policy_runner(STAND_SPEC, robot), 5, index, value)
    rig = Rig(Controller(robot, {MOTION: motion}, config, hold_policy=standing))
    rig.to_hold()
    rig.step(0.2)
    out = next(o for o in rig.outputs if o.mode is Mode.DAMPING)
    assert out.fault.startswith(reason) and out.transition.from_mode is Mode.HOLD
    np.testing.assert_array_equal(out.command.kp, np.zeros(NUM_MOTORS))
    assert (out.hold_policy is not None) == (not isinstance(value, Exception)) and out.policy is None


def test_state_checks_apply_while_the_actor_stands(rig: Rig) -> None:
    rig.to_hold()
    out = rig.step(tilt_deg=70.0)
    assert out.mode is Mode.DAMPING and "torso tilt 70.0 deg" in out.fault


# --- configuration ----------------------------------------------------------------------------


def _config_with_hold_policy(tmp_path, value) -> str:
    data = yaml.safe_load(config_file("controller.yaml").read_text())
    data["hold"]["policy"] = value
    path = tmp_path / "controller.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_hold_policy_config(tmp_path) -> None:
    assert load_controller_config(_config_with_hold_policy(tmp_path, None)).hold_policy is None
    assert load_controller_config(_config_with_hold_policy(tmp_path, str(STAND_SPEC))).hold_policy == STAND_SPEC
    path = _config_with_hold_policy(tmp_path, "missing.yaml")
    with pytest.raises(ConfigError, match=r"hold\.policy: policy spec not found .*missing\.yaml") as error:
        load_controller_config(path)
    assert error.value.file == path


def test_policy_roles_are_checked(robot, config, motion) -> None:
    with pytest.raises(ConfigError, match="policy hold: the hold policy must be a standing actor"):
        Controller(robot, {}, config, hold_policy=motion)
    standing = load_policy_runner(STAND_SPEC, robot)
    with pytest.raises(ConfigError, match="policy stand: a motion policy needs a clip"):
        Controller(robot, {"stand": standing}, config, hold_policy=standing)
    with pytest.raises(ConfigError, match=r"hold\.policy: names a standing actor, but none was given") as error:
        Controller(robot, {MOTION: motion}, config)  # the config names one: the controller never loads it itself
    assert error.value.file == config.source
