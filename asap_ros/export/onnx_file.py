"""Small ONNX files written by hand (protobuf wire format, no ``onnx`` package): an MLP, or any graph of a few nodes.

The graph is ASAP's export shape (``humanoidverse/utils/inference_helpers.py``
``export_policy_as_onnx``): one float32 input ``actor_obs`` [1, D], one output ``action``
[1, A], opset 13. Layers are ``Gemm`` (``y = x W + b``, W of shape (in, out)) with ``Elu``
(alpha 1, ASAP's activation) between them; a single layer is a linear (affine) model. Other
graphs are lists of :class:`Node` over named float32 initializers. Any ONNX reader loads them
(ONNX Runtime here); ``metadata`` goes into the model's ``metadata_props``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

IR_VERSION = 7
"""ONNX IR version of opset 13 (ONNX 1.8)."""
OPSET = 13
FLOAT = 1
"""``TensorProto.FLOAT`` and ``AttributeProto.FLOAT``."""
INT = 2
"""``AttributeProto.INT``."""
PRODUCER = "asap_ros"
INPUT, OUTPUT = "actor_obs", "action"

# Wire types of the protobuf encoding.
_VARINT, _LENGTH, _FIXED32 = 0, 2, 5


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf encodes it
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _key(field, _VARINT) + _varint(value)


def _bytes(field: int, payload: bytes) -> bytes:
    return _key(field, _LENGTH) + _varint(len(payload)) + payload


def _text(field: int, text: str) -> bytes:
    return _bytes(field, text.encode("utf-8"))


def _float(field: int, value: float) -> bytes:
    return _key(field, _FIXED32) + struct.pack("<f", value)


def _tensor(name: str, array: np.ndarray) -> bytes:
    """``TensorProto``: dims (1), data_type (2), name (8), raw_data (9, little-endian float32)."""
    data = np.ascontiguousarray(array, dtype="<f4")
    return b"".join(_int(1, d) for d in data.shape) + _int(2, FLOAT) + _text(8, name) + _bytes(9, data.tobytes())


def _value_info(name: str, shape: Sequence[int]) -> bytes:
    """``ValueInfoProto`` of a float tensor: name (1), type (2) -> tensor_type (1) -> elem_type, shape."""
    dims = b"".join(_bytes(1, _int(1, d)) for d in shape)
    tensor_type = _int(1, FLOAT) + _bytes(2, dims)
    return _text(1, name) + _bytes(2, _bytes(1, tensor_type))


def _node(op: str, inputs: Sequence[str], outputs: Sequence[str], name: str, attributes: bytes = b"") -> bytes:
    """``NodeProto``: input (1), output (2), name (3), op_type (4), attribute (5)."""
    return (b"".join(_text(1, i) for i in inputs) + b"".join(_text(2, o) for o in outputs) + _text(3, name)
            + _text(4, op) + attributes)  # fmt: skip


def _attribute(name: str, value: float | int) -> bytes:
    """``AttributeProto``: name (1), f (2) or i (3), type (20) = FLOAT (1) or INT (2)."""
    if isinstance(value, int):
        return _bytes(5, _text(1, name) + _int(3, value) + _int(20, INT))
    return _bytes(5, _text(1, name) + _float(2, value) + _int(20, FLOAT))


@dataclass(frozen=True)
class Node:
    """One graph node: ``op`` (an ONNX operator, default domain), its inputs, one output, an attribute
    (a float, or an int such as ``Concat``'s axis)."""

    op: str
    inputs: tuple[str, ...]
    output: str
    attribute: tuple[str, float | int] | None = None


@dataclass(frozen=True)
class ClampFeature:
    """Inputs a model derives inside its graph: how far the joint limits cut the target of the
    action in the input, ``clip(w·x + b, low, high) − (w·x + b)`` (one column per joint)."""

    weight: np.ndarray
    """(D, J) the target's weights on the input."""
    bias: np.ndarray
    low: np.ndarray
    high: np.ndarray

    @property
    def width(self) -> int:
        return len(self.bias)

    def excess(self, x: np.ndarray) -> np.ndarray:
        target = x @ self.weight + self.bias
        return np.clip(target, self.low, self.high) - target

    def nodes(self, source: str, output: str) -> tuple[list[Node], dict[str, np.ndarray]]:
        """Graph nodes from ``source`` to ``output`` = ``[source, excess]`` and their initializers."""
        nodes = [Node("Gemm", (source, "clamp_w", "clamp_b"), "clamp_target"),
                 Node("Min", ("clamp_target", "clamp_high"), "clamp_below"),
                 Node("Max", ("clamp_below", "clamp_low"), "clamp_clipped"),
                 Node("Sub", ("clamp_clipped", "clamp_target"), "clamp_excess"),
                 Node("Concat", (source, "clamp_excess"), output, ("axis", 1))]  # fmt: skip
        arrays = {"clamp_w": self.weight, "clamp_b": self.bias, "clamp_low": self.low, "clamp_high": self.high}
        return nodes, {k: np.asarray(v, dtype=np.float32) for k, v in arrays.items()}


def model_bytes(nodes: Sequence[Node], initializers: Mapping[str, np.ndarray], input_dim: int, output_dim: int,
                input_name: str = INPUT, output_name: str = OUTPUT,
                metadata: Mapping[str, str] | None = None) -> bytes:  # fmt: skip
    """The serialised ``ModelProto`` of a graph from ``input_name`` [1, input_dim] to ``output_name`` [1, output_dim]."""
    encoded = [_node(n.op, n.inputs, [n.output], f"{n.op.lower()}{i}",
                     _attribute(*n.attribute) if n.attribute else b"") for i, n in enumerate(nodes)]  # fmt: skip
    graph = (b"".join(_bytes(1, node) for node in encoded) + _text(2, "graph")
             + b"".join(_bytes(5, _tensor(name, array)) for name, array in initializers.items())
             + _bytes(11, _value_info(input_name, (1, input_dim)))
             + _bytes(12, _value_info(output_name, (1, output_dim))))  # fmt: skip
    props = b"".join(_bytes(14, _text(1, k) + _text(2, v)) for k, v in (metadata or {}).items())
    return (_int(1, IR_VERSION) + _text(2, PRODUCER) + _bytes(7, graph)
            + _bytes(8, _text(1, "") + _int(2, OPSET)) + props)  # fmt: skip


def mlp_model_bytes(layers: Sequence[tuple[np.ndarray, np.ndarray]], metadata: Mapping[str, str] | None = None,
                    clamp: ClampFeature | None = None) -> bytes:  # fmt: skip
    """The serialised ``ModelProto`` of ``x -> Gemm -> Elu -> ... -> Gemm`` (batch 1); with ``clamp``,
    the first layer reads ``[x, clamp excess]`` (:class:`ClampFeature`)."""
    if not layers:
        raise ValueError("an MLP needs at least one layer")
    width = layers[0][0].shape[0]
    nodes: list[Node] = []
    initializers: dict[str, np.ndarray] = {}
    current = INPUT
    if clamp is not None:
        nodes, initializers = clamp.nodes(INPUT, "features")
        current = "features"
    for n, (weight, bias) in enumerate(layers):
        weight, bias = np.asarray(weight), np.asarray(bias)
        if weight.ndim != 2 or weight.shape[0] != width or bias.shape != (weight.shape[1],):
            raise ValueError(f"layer {n}: weight {weight.shape} and bias {bias.shape} do not chain from width {width}")
        width = weight.shape[1]
        last = n == len(layers) - 1
        linear = OUTPUT if last else f"linear{n}"
        initializers[f"weight{n}"], initializers[f"bias{n}"] = weight, bias
        nodes.append(Node("Gemm", (current, f"weight{n}", f"bias{n}"), linear))
        current = linear
        if not last:
            current = f"elu{n}"
            nodes.append(Node("Elu", (linear,), current, ("alpha", 1.0)))
    input_dim = layers[0][0].shape[0] - (clamp.width if clamp is not None else 0)
    return model_bytes(nodes, initializers, input_dim, width, metadata=metadata)


def write_onnx(path: str | Path, data: bytes) -> Path:
    """Write a serialised model atomically (temporary file, then rename); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def write_mlp_onnx(path: str | Path, layers: Sequence[tuple[np.ndarray, np.ndarray]],
                   metadata: Mapping[str, str] | None = None, clamp: ClampFeature | None = None) -> Path:  # fmt: skip
    """An MLP's ONNX file; returns the path."""
    return write_onnx(path, mlp_model_bytes(layers, metadata, clamp))


def mlp_forward(layers: Sequence[tuple[np.ndarray, np.ndarray]], x: np.ndarray,
                clamp: ClampFeature | None = None) -> np.ndarray:  # fmt: skip
    """The same network in numpy (float64): what the ONNX file computes."""
    out = np.asarray(x, dtype=np.float64)
    if clamp is not None:
        out = np.concatenate([out, clamp.excess(out)], axis=-1)
    for n, (weight, bias) in enumerate(layers):
        out = out @ weight + bias
        if n < len(layers) - 1:
            out = np.where(out > 0, out, np.expm1(np.minimum(out, 0.0)))
    return out
