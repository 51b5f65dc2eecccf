"""The exact delta for a simulated robot whose motors give ``scale`` × their torque, as ONNX delta models.

The recorded robot (:mod:`asap_ros.sim.motors`, the runtime's targets) applies
``τ_real = scale·clip(kp·(c − q) − kd·dq, ±L)`` with ``c = clip(0.25·a + default, joint limits)``;
the nominal trainer simulator applies ``kp·(0.25·Δa + 0.25·a + default − q) − kd·dq``. Equal when

    0.25·Δa = scale·clip(kp·(c − q) − kd·dq, ±L)/kp + (kd/kp)·dq − 0.25·a + (q − default)

(``exact``). Without the two clips this is
``0.25·Δa = (scale − 1)·((0.25·a + default − q) − (kd/kp)·dq)`` (``linear``): ASAP's
``_get_perfect_delta_a`` (``delta_a_open_loop.py``, 0.65 × kp) is its first term, and a torque scale
also weakens the damping, hence the second. Inputs: ``actions_open_loop`` (a), ``dof_pos``
(q − default), ``dof_vel`` (× 0.05) of the 108.

For a simulator that clips its targets as the runtime does (``--targets runtime``) a joint at full
torque needs no Δa at all (the simulator clamps and clips its effort as the robot does): the
``runtime`` oracle is 0 there; weakened joints keep the whole formula (their target lies strictly
inside the limits, so the simulator's clip leaves it alone).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from asap_ros.core.robot import RobotModel
from asap_ros.export.delta import DELTA_INPUT_DIM, term_offset
from asap_ros.export.onnx_file import INPUT, OUTPUT, Node, model_bytes, write_mlp_onnx, write_onnx
from asap_ros.export.trainer_sim import ACTION_SCALE
from asap_ros.tracking.kinematics import DRIVEN_MOTORS, NUM_DRIVEN

_JOINTS = np.arange(NUM_DRIVEN)


def _selector(**coefficients: np.ndarray) -> np.ndarray:
    """(108, 23) weights taking ``coefficient·raw value`` of each named term (scales undone)."""
    weight = np.zeros((DELTA_INPUT_DIM, NUM_DRIVEN))
    for name, coefficient in coefficients.items():
        at, scale = term_offset(name)
        weight[at + _JOINTS, _JOINTS] = coefficient / scale
    return weight


def linear_layers(robot: RobotModel, torque_scale: float | np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The unclipped exact delta as one linear layer (108 -> 23)."""
    kp, kd = robot.kp[DRIVEN_MOTORS], robot.kd[DRIVEN_MOTORS]
    gain = (_driven_scale(torque_scale) - 1.0) / ACTION_SCALE
    weight = _selector(actions_open_loop=gain * ACTION_SCALE, dof_pos=-gain, dof_vel=-gain * kd / kp)
    return [(weight, np.zeros(NUM_DRIVEN))]


def exact_model_bytes(robot: RobotModel, torque_scale: float | np.ndarray, runtime: bool = False) -> bytes:
    """The exact delta with the runtime's joint-limit clamp and the motors' effort clip (see the module doc;
    ``runtime``: 0 on the joints at full torque, for a simulator that clips its targets)."""
    driven = DRIVEN_MOTORS
    kp, kd, default = robot.kp[driven], robot.kd[driven], robot.default_q[driven]
    effort = robot.tau_limit[driven]
    ones = np.ones(NUM_DRIVEN)
    f32 = np.float32
    init = {
        "target_w": _selector(actions_open_loop=ACTION_SCALE * ones), "target_b": default,  # 0.25·a + default
        "q_low": robot.q_lower[driven], "q_high": robot.q_upper[driven],
        "kp_diag": np.diag(kp), "zero": np.zeros(NUM_DRIVEN),
        "pd_w": _selector(dof_pos=-kp, dof_vel=-kd), "pd_b": -kp * default,  # −kp·q − kd·dq
        "tau_low": -effort, "tau_high": effort,
        "tau_w": np.diag(_driven_scale(torque_scale) / (ACTION_SCALE * kp)),
        "rest_w": _selector(dof_vel=kd / kp / ACTION_SCALE, actions_open_loop=-ones, dof_pos=ones / ACTION_SCALE),
    }
    nodes = [
        Node("Gemm", (INPUT, "target_w", "target_b"), "target"),
        Node("Min", ("target", "q_high"), "below"),
        Node("Max", ("below", "q_low"), "clamped"),
        Node("Gemm", ("clamped", "kp_diag", "zero"), "kp_target"),
        Node("Gemm", (INPUT, "pd_w", "pd_b"), "pd_rest"),
        Node("Add", ("kp_target", "pd_rest"), "tau"),
        Node("Min", ("tau", "tau_high"), "tau_below"),
        Node("Max", ("tau_below", "tau_low"), "tau_clipped"),
        Node("Gemm", ("tau_clipped", "tau_w", "zero"), "from_tau"),
        Node("Gemm", (INPUT, "rest_w", "zero"), "rest"),
        Node("Add", ("from_tau", "rest"), "exact" if runtime else OUTPUT),
    ]
    if runtime:  # only the weakened joints
        init["weak_w"] = np.diag((_driven_scale(torque_scale) != 1.0).astype(np.float64))
        nodes.append(Node("Gemm", ("exact", "weak_w", "zero"), OUTPUT))
    kind = "oracle: torque scale and effort clip (runtime targets)" if runtime else "oracle: torque scale, clamp and effort clip"
    return model_bytes(nodes, {k: np.asarray(v, dtype=f32) for k, v in init.items()}, DELTA_INPUT_DIM, NUM_DRIVEN,
                       metadata={"asap_ros.delta.kind": kind})  # fmt: skip


def _driven_scale(torque_scale: float | np.ndarray) -> np.ndarray:
    """(23,) torque factor of the driven joints from one factor or a (29,) motor-order array (a profile's)."""
    scale = np.asarray(torque_scale, dtype=np.float64)
    return np.full(NUM_DRIVEN, float(scale)) if scale.ndim == 0 else scale[DRIVEN_MOTORS]


def write_oracle_delta(path: str | Path, robot: RobotModel, torque_scale: float | np.ndarray,
                       exact: bool = True, runtime: bool = False) -> Path:  # fmt: skip
    """The oracle delta model for a robot at ``torque_scale`` × torque on every joint (``exact``: with the
    runtime's joint-limit clamp and the effort clip; else ASAP's linear perfect delta with the damping
    term). ``torque_scale``: one factor, or a profile's (29,) ``torque_scale``; ``runtime``: the exact delta
    for a simulator that clips its targets (no Δa on the joints at full torque)."""
    if exact:
        return write_onnx(path, exact_model_bytes(robot, torque_scale, runtime))
    layers = [(w.astype(np.float32), b.astype(np.float32)) for w, b in linear_layers(robot, torque_scale)]
    return write_mlp_onnx(path, layers, {"asap_ros.delta.kind": "oracle: torque scale, linear"})
