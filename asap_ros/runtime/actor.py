"""ONNX models run one observation at a time: the actor checked against its policy spec, or any
model checked against the input/output names and widths it must have (a delta-action model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from asap_ros.config.actor_model import onnx_session
from asap_ros.core.errors import ConfigError
from asap_ros.core.policy_spec import PolicySpec

_FLOAT = "tensor(float)"


class OnnxModel:
    """ONNX Runtime session (one intra-op thread, sequential) mapping obs [D] -> output [A].

    Input/output names, element type and shapes must be ``input_name`` [1 or batch, D] and
    ``output_name`` [1 or batch, A]; a mismatch is a :class:`ConfigError` naming ``source``, the
    key (``<key>.input.dim`` ...) and both values. Each call runs through an I/O binding to
    buffers allocated once, so one thread at a time may call a model.
    """

    def __init__(self, path: str | Path, input_name: str, input_dim: int, output_name: str, output_dim: int,
                 source: str | Path, key: str = "actor"):  # fmt: skip
        self.path = Path(path)
        self.source = source
        self.key = key
        self.session = onnx_session(self.path, source, f"{key}.file")
        self._check_io("input", self.session.get_inputs(), input_name, input_dim)
        self._check_io("output", self.session.get_outputs(), output_name, output_dim)
        self._input = np.zeros((1, input_dim), dtype=np.float32)
        self._output = np.zeros((1, output_dim), dtype=np.float32)
        self._binding = self.session.io_binding()
        self._binding.bind_cpu_input(input_name, self._input)
        self._binding.bind_output(output_name, "cpu", 0, np.float32, list(self._output.shape), self._output.ctypes.data)

    def _check_io(self, kind: str, args: list, name: str, dim: int) -> None:
        actual = [a.name for a in args]
        if actual != [name]:
            problem = f"ONNX model {self.path.name} has {kind}s {actual}"
            raise ConfigError(self.source, f"{self.key}.{kind}.name", problem, name)
        arg = args[0]
        if arg.type != _FLOAT:
            raise ConfigError(self.source, f"{self.key}.{kind}", f"ONNX {kind} {name} must be {_FLOAT}", arg.type)
        shape = list(arg.shape)
        batch_ok = len(shape) == 2 and (shape[0] == 1 or not isinstance(shape[0], int))
        if not batch_ok or shape[1] != dim:
            problem = f"is {dim} but ONNX model {self.path.name} {kind} {name} has shape {shape}"
            raise ConfigError(self.source, f"{self.key}.{kind}.dim", problem, dim)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Output for one float32 observation of the input dim (returns a new [A] array)."""
        np.copyto(self._input, obs.reshape(1, -1), casting="no")  # float32 only, as the model takes
        self.session.run_with_iobinding(self._binding)
        return self._output[0].copy()


class OnnxActor(OnnxModel):
    """The actor of a policy spec: names and widths from the spec, errors name the spec file."""

    def __init__(self, path: str | Path, spec: PolicySpec):
        self.spec = spec
        super().__init__(path, spec.input_name, spec.input_dim, spec.output_name, spec.output_dim, spec.source)
