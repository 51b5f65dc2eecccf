"""The ONNX actor, checked against its policy spec before it is ever run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from asap_ros.core.errors import ConfigError
from asap_ros.core.policy_spec import PolicySpec

_FLOAT = "tensor(float)"


class OnnxActor:
    """ONNX Runtime session (one intra-op thread, sequential) mapping obs [D] -> action [A].

    Input/output names, element type and shapes must match the spec; a mismatch is a
    :class:`ConfigError` naming the spec file, the key and both values. Each call runs through
    an I/O binding to buffers allocated once, so one thread at a time may call an actor.
    """

    def __init__(self, path: str | Path, spec: PolicySpec):
        self.path = Path(path)
        self.spec = spec
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT raises its own exception types for unreadable models
            raise ConfigError(spec.source, "actor.file", f"not a loadable ONNX model: {exc}", str(self.path)) from exc
        self._check_io("input", self.session.get_inputs(), spec.input_name, spec.input_dim)
        self._check_io("output", self.session.get_outputs(), spec.output_name, spec.output_dim)
        self._input = np.zeros((1, spec.input_dim), dtype=np.float32)
        self._output = np.zeros((1, spec.output_dim), dtype=np.float32)
        self._binding = self.session.io_binding()
        self._binding.bind_cpu_input(spec.input_name, self._input)
        self._binding.bind_output(
            spec.output_name, "cpu", 0, np.float32, list(self._output.shape), self._output.ctypes.data
        )

    def _check_io(self, kind: str, args: list, name: str, dim: int) -> None:
        actual = [a.name for a in args]
        if actual != [name]:
            problem = f"ONNX model {self.path.name} has {kind}s {actual}"
            raise ConfigError(self.spec.source, f"actor.{kind}.name", problem, name)
        arg = args[0]
        if arg.type != _FLOAT:
            raise ConfigError(self.spec.source, f"actor.{kind}", f"ONNX {kind} {name} must be {_FLOAT}", arg.type)
        shape = list(arg.shape)
        batch_ok = len(shape) == 2 and (shape[0] == 1 or not isinstance(shape[0], int))
        if not batch_ok or shape[1] != dim:
            problem = f"is {dim} but ONNX model {self.path.name} {kind} {name} has shape {shape}"
            raise ConfigError(self.spec.source, f"actor.{kind}.dim", problem, dim)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Action for one float32 observation of the spec's input dim (returns a new [A] array)."""
        np.copyto(self._input, obs.reshape(1, -1), casting="no")  # float32 only, as the model takes
        self.session.run_with_iobinding(self._binding)
        return self._output[0].copy()
