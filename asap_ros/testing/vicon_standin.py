"""Stand-in for the Vicon DataStream SDK's Python client, for tests only.

A Vicon motion-capture system (cameras, Vicon Tracker/Nexus, its DataStream server) cannot
exist on this machine, so :class:`Client` plays a scripted subject trajectory through the
same API surface :class:`asap_ros.mocap.vicon.ViconSource` uses, with the SDK's names, units
and return shapes (``vicon_dssdk/ViconDataStream.py``, SDK 1.x):

- ``Connect(host)``, ``IsConnected() -> bool``, ``EnableSegmentData()``,
  ``SetStreamMode(Client.StreamMode.E...)`` (server push: each ``GetFrame`` waits for the next
  frame, buffered frames come at once);
- ``GetFrame() -> bool`` (``False`` once the script is over: the server stops streaming);
- ``GetFrameNumber() -> int``, ``GetFrameRate() -> float`` (Hz), ``GetLatencyTotal() -> float``
  (s), ``GetSubjectNames() -> list[str]``;
- ``GetSegmentGlobalTranslation(subject, segment) -> ((x, y, z) in mm, occluded)`` and
  ``GetSegmentGlobalRotationQuaternion(subject, segment) -> ((x, y, z, w), occluded)``;
- errors raise :class:`DataStreamException` whose text is the SDK's result name
  (``NotConnected``, ``NoFrame``, ``InvalidSubjectName``, ``InvalidSegmentName``).

Differences from the SDK: the constructor takes the script; frame numbers missing from the
script are frames the server never delivers (drops); ``delivered_ns`` records when each frame
was handed out so tests can check latency compensation.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum


class DataStreamException(Exception):
    """The SDK's exception: ``str()`` is the result name (e.g. ``NoFrame``)."""

    def __init__(self, code: str, additional: str = ""):
        super().__init__(code)
        self.message = code
        self.additional = additional

    def __str__(self) -> str:
        return f"{self.message} {self.additional}" if self.additional else self.message


@dataclass(frozen=True)
class ScriptedFrame:
    """One frame the stand-in server streams."""

    frame_number: int
    position_mm: tuple[float, float, float]
    quat_xyzw: tuple[float, float, float, float]
    occluded: bool = False
    latency_s: float = 0.0


class Client:
    """Scripted DataStream server + client (see module docstring)."""

    class StreamMode(Enum):
        EClientPull = 0
        EClientPullPreFetch = 1
        EServerPush = 2

    def __init__(self, frames: Sequence[ScriptedFrame], frame_rate_hz: float, subject: str, segment: str):
        numbers = [f.frame_number for f in frames]
        if numbers != sorted(set(numbers)):
            raise ValueError("scripted frame numbers must be strictly increasing")
        self.frames = list(frames)
        self.frame_rate_hz = frame_rate_hz
        self.subject = subject
        self.segment = segment
        self.delivered_ns: dict[int, int] = {}
        self._connected = False
        self._segment_data = False
        self._stream_mode = Client.StreamMode.EClientPull
        self._start_s = 0.0
        self._next = 0
        self._current: ScriptedFrame | None = None

    def Connect(self, host: str) -> None:
        if not host:
            raise DataStreamException("InvalidHostName")
        self._connected = True
        self._start_s = time.monotonic()

    def IsConnected(self) -> bool:
        return self._connected

    def EnableSegmentData(self) -> None:
        self._require_connection()
        self._segment_data = True

    def SetStreamMode(self, mode: Client.StreamMode) -> None:
        self._require_connection()
        if mode is not Client.StreamMode.EServerPush:
            raise NotImplementedError("the stand-in serves server-push mode only (what ViconSource uses)")
        self._stream_mode = mode

    def GetFrame(self) -> bool:
        self._require_connection()
        if self._next >= len(self.frames):
            return False
        frame = self.frames[self._next]
        due = self._start_s + (frame.frame_number - self.frames[0].frame_number) / self.frame_rate_hz
        delay = due - time.monotonic()
        if delay > 0.0:
            time.sleep(delay)
        self._next += 1
        self._current = frame
        self.delivered_ns[frame.frame_number] = time.time_ns()
        return True

    def GetFrameNumber(self) -> int:
        return self._frame().frame_number

    def GetFrameRate(self) -> float:
        self._frame()
        return self.frame_rate_hz

    def GetLatencyTotal(self) -> float:
        return self._frame().latency_s

    def GetSubjectNames(self) -> list[str]:
        self._frame()
        return [self.subject]

    def GetSegmentGlobalTranslation(self, subject: str, segment: str) -> tuple[tuple[float, float, float], bool]:
        frame = self._segment_frame(subject, segment)
        if frame.occluded:
            return (0.0, 0.0, 0.0), True
        return tuple(frame.position_mm), False

    def GetSegmentGlobalRotationQuaternion(
        self, subject: str, segment: str
    ) -> tuple[tuple[float, float, float, float], bool]:
        frame = self._segment_frame(subject, segment)
        if frame.occluded:
            return (0.0, 0.0, 0.0, 1.0), True
        return tuple(frame.quat_xyzw), False

    def _require_connection(self) -> None:
        if not self._connected:
            raise DataStreamException("NotConnected")

    def _frame(self) -> ScriptedFrame:
        self._require_connection()
        if self._current is None:
            raise DataStreamException("NoFrame")
        return self._current

    def _segment_frame(self, subject: str, segment: str) -> ScriptedFrame:
        frame = self._frame()
        if not self._segment_data:
            raise DataStreamException("NoFrame", "segment data not enabled")
        if subject != self.subject:
            raise DataStreamException("InvalidSubjectName")
        if segment != self.segment:
            raise DataStreamException("InvalidSegmentName")
        return frame
