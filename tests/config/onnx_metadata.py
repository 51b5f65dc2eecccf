"""A copy of a real ONNX file with its ``metadata_props`` changed (a test's bad input), written by
rewriting the ModelProto's top-level fields (protobuf wire format; field 14 holds the metadata
entries ``{1: key, 2: value}``); the graph and weights are the file's own bytes."""

from __future__ import annotations

from pathlib import Path


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _string(field: int, text: bytes) -> bytes:
    return _encode_varint(field << 3 | 2) + _encode_varint(len(text)) + text


def with_metadata(source: Path, target: Path, changes: dict[str, str | None]) -> Path:
    """Write ``source`` to ``target`` with each ``changes`` key set to its value (None: removed)."""
    out = bytearray()
    for field, _, payload, whole in _fields(source.read_bytes()):
        if field == 14:  # ModelProto.metadata_props
            klen, kpos = _varint(payload, 1)
            name = payload[kpos : kpos + klen].decode()
            if name in changes:
                continue
        out += whole
    for name, value in changes.items():
        if value is not None:
            out += _string(14, _string(1, name.encode()) + _string(2, value.encode()))
    target.write_bytes(bytes(out))
    return target


def _fields(data: bytes) -> list[tuple[int, int, bytes, bytes]]:
    """``(field, wire type, payload, whole encoded field)`` of each top-level field of a message."""
    fields, pos = [], 0
    while pos < len(data):
        start = pos
        key, pos = _varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, end = _varint(data, pos)
            payload = data[pos:end]
        elif wire == 2:
            length, pos = _varint(data, pos)
            end = pos + length
            payload = data[pos:end]
        elif wire in (1, 5):
            end = pos + (8 if wire == 1 else 4)
            payload = data[pos:end]
        else:
            raise ValueError(f"unexpected wire type {wire} at byte {start}")
        pos = end
        fields.append((field, wire, payload, data[start:end]))
    return fields


def with_external_data(source: Path, target: Path) -> Path:
    """Write ``source`` as ``target`` + ``target.name + '.data'``: every initializer's ``raw_data``
    (TensorProto field 9) moved into the data file, with ``external_data`` (field 13: location,
    offset, length) and ``data_location`` EXTERNAL (field 14 = 1), as mjlab's exporter writes them."""
    data_name = target.name + ".data"
    blob = bytearray()
    model = bytearray()
    for field, _, payload, whole in _fields(source.read_bytes()):
        if field != 7:  # ModelProto.graph
            model += whole
            continue
        graph = bytearray()
        for gfield, _, gpayload, gwhole in _fields(payload):
            if gfield != 5:  # GraphProto.initializer
                graph += gwhole
                continue
            tensor = bytearray()
            for tfield, _, tpayload, twhole in _fields(gpayload):
                if tfield == 9:
                    offset = len(blob)
                    blob += tpayload
                    for key, value in (("location", data_name), ("offset", str(offset)), ("length", str(len(tpayload)))):
                        tensor += _string(13, _string(1, key.encode()) + _string(2, value.encode()))
                    tensor += _encode_varint(14 << 3) + _encode_varint(1)
                else:
                    tensor += twhole
            graph += _string(5, bytes(tensor))
        model += _string(7, bytes(graph))
    target.write_bytes(bytes(model))
    (target.parent / data_name).write_bytes(bytes(blob))
    return target
