"""A trainer actor's ONNX model run as its contract says: the observation (and BeyondMimic's
``time_step``) in, the raw action and, for a model holding a motion, its reference out."""

from __future__ import annotations

import numpy as np

from asap_ros.config.actor_model import onnx_session
from asap_ros.core.actor_contract import ActorContract
from asap_ros.core.errors import ConfigError

REFERENCE_OUTPUTS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w")
"""BeyondMimic's motion outputs at the ``time_step`` given (world frame of training)."""


class TrainerActor:
    """ONNX Runtime session (one thread) checked against the contract's inputs and output."""

    def __init__(self, contract: ActorContract):
        self.contract = contract
        source = contract.source
        self.session = onnx_session(contract.actor_path, source, "actor.file")
        actual = [(a.name, a.shape[-1]) for a in self.session.get_inputs()]
        if actual != list(contract.inputs):
            raise ConfigError(source, "actor.inputs", f"the model takes {actual}", list(contract.inputs))
        outputs = {a.name: a.shape[-1] for a in self.session.get_outputs()}
        if outputs.get(contract.action_output) != len(contract.joints):
            problem = f"the model's outputs are {outputs}; the action must have one value per joint ({len(contract.joints)})"
            raise ConfigError(source, "actor.output", problem, contract.action_output)
        self.has_reference = all(n in outputs for n in REFERENCE_OUTPUTS)
        # one I/O binding to buffers allocated once (as OnnxModel): one thread at a time may call it
        shapes = {a.name: [1, *a.shape[1:]] for a in self.session.get_outputs()}
        self._obs = np.zeros((1, contract.inputs[0][1]), dtype=np.float32)
        self._time_step = np.zeros((1, 1), dtype=np.float32)
        self._binding = self.session.io_binding()
        self._binding.bind_cpu_input(contract.inputs[0][0], self._obs)
        if len(contract.inputs) > 1:
            self._binding.bind_cpu_input("time_step", self._time_step)
        self._outputs: dict[str, np.ndarray] = {}
        for name in [contract.action_output, *(REFERENCE_OUTPUTS if self.has_reference else ())]:
            buffer = np.zeros(shapes[name], dtype=np.float32)
            self._binding.bind_output(name, "cpu", 0, np.float32, list(buffer.shape), buffer.ctypes.data)
            self._outputs[name] = buffer
        self._action = self._outputs[contract.action_output]
        self.reference: dict[str, np.ndarray] = {}
        """The last call's reference outputs (batch dimension removed; overwritten by the next call)."""

    def __call__(self, obs: np.ndarray, time_step: int = 0) -> np.ndarray:
        """Raw action (actor order) for one float32 observation; keeps the reference outputs."""
        np.copyto(self._obs, obs.reshape(1, -1), casting="no")  # float32 only, as the model takes
        self._time_step[0, 0] = time_step
        self.session.run_with_iobinding(self._binding)
        if self.has_reference:
            self.reference = {n: self._outputs[n][0] for n in REFERENCE_OUTPUTS}
        return self._action[0].copy()
