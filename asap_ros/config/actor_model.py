"""A trainer's ONNX file as the importer and the contract read it: inputs, outputs, metadata,
SHA-256, external weights (``MODEL.onnx.data``) and, for a model holding a motion, its reference
at a ``time_step``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort

from asap_ros.config.policy_spec import sha256_of
from asap_ros.core.errors import ConfigError

_FLOAT = "tensor(float)"
_LOCATION = re.compile(rb"\x0a\x08location\x12([\x01-\x7f])")
"""An ONNX ``StringStringEntryProto`` ``{key: "location", value: <file>}`` (field 1, field 2; a
file name of under 128 bytes): where a tensor's external data lies, relative to the model."""


@dataclass
class ActorFile:
    path: Path
    session: ort.InferenceSession
    sha256: str
    metadata: dict[str, str]
    input_names: tuple[str, ...]
    input_dims: dict[str, int]
    output_names: tuple[str, ...]
    output_dims: dict[str, int]
    external_data: tuple[tuple[Path, str], ...]

    def reference(self, step: int) -> tuple[np.ndarray, ...]:
        """``(joint_pos, joint_vel, body_quat_w, body_pos_w)`` of the motion at ``time_step`` on the
        zero observation (they do not depend on it)."""
        feed = {self.input_names[0]: np.zeros((1, self.input_dims[self.input_names[0]]), dtype=np.float32),
                "time_step": np.array([[float(step)]], dtype=np.float32)}  # fmt: skip
        names = ["joint_pos", "joint_vel", "body_quat_w", "body_pos_w"]
        return tuple(np.asarray(o)[0] for o in self.session.run(names, feed))


def external_data_files(path: Path) -> tuple[Path, ...]:
    """Files the model's tensors keep their weights in (``data_location: EXTERNAL``), in order."""
    found: list[Path] = []
    data = path.read_bytes()
    for match in _LOCATION.finditer(data):
        length = match.group(1)[0]
        name = data[match.end() : match.end() + length].decode("utf-8", "replace")
        file = path.parent / name
        if file not in found:
            found.append(file)
    for file in found:
        if not file.is_file():
            raise ConfigError(path, "external_data", "the model keeps weights in a file that is not there", str(file))
    return tuple(found)


def _width(path: Path, kind: str, arg: ort.NodeArg) -> int:
    if arg.type != _FLOAT:
        raise ConfigError(path, f"{kind}.{arg.name}", f"must be {_FLOAT}", arg.type)
    shape = list(arg.shape)
    width = int(np.prod([d for d in shape[1:] if isinstance(d, int)])) if len(shape) > 1 else 1
    return width


def onnx_session(path: Path, source: str | Path, key: str) -> ort.InferenceSession:
    """An ONNX Runtime session on the CPU, one thread, sequential (the control step's settings);
    an unreadable model is a :class:`ConfigError` naming ``source``, ``key`` and the path."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises its own exception types for unreadable models
        raise ConfigError(source, key, f"not a loadable ONNX model: {exc}", str(path)) from exc


def open_actor_file(path: Path) -> ActorFile:
    """Load ``path`` with ONNX Runtime on the CPU (external weights beside it)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(path, None, "no such ONNX file", str(path))
    external = external_data_files(path)
    session = onnx_session(path, path, "file")
    inputs, outputs = session.get_inputs(), session.get_outputs()
    return ActorFile(
        path=path, session=session, sha256=sha256_of(path),
        metadata=dict(session.get_modelmeta().custom_metadata_map),
        input_names=tuple(a.name for a in inputs), input_dims={a.name: _width(path, "input", a) for a in inputs},
        output_names=tuple(a.name for a in outputs), output_dims={a.name: _width(path, "output", a) for a in outputs},
        external_data=tuple((f, sha256_of(f)) for f in external),
    )  # fmt: skip
