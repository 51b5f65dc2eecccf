"""Client of the Vicon DataStream SDK: one subject segment's pose per camera frame.

The SDK's Python module (``vicon_dssdk``) ships with Vicon's DataStream SDK installer and is
not on PyPI, so it is imported only when a Vicon source is opened. Calls used (SDK 1.x,
``vicon_dssdk/ViconDataStream.py``): ``Client()``, ``Connect(host)``, ``IsConnected()``,
``EnableSegmentData()``, ``SetStreamMode(Client.StreamMode.EServerPush)``, ``GetFrame()``
(``False`` or ``DataStreamException`` when no frame), ``GetFrameNumber()``, ``GetFrameRate()``
(Hz), ``GetLatencyTotal()`` (s), ``GetSubjectNames()``,
``GetSegmentGlobalTranslation(subject, segment) -> ((x, y, z) mm, occluded)`` and
``GetSegmentGlobalRotationQuaternion(subject, segment) -> ((x, y, z, w), occluded)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from asap_ros.core.errors import AsapError, ConfigError
from asap_ros.core.quaternion import xyzw_to_wxyz

MM = 1e-3


def import_vicon_sdk() -> ModuleType:
    """``vicon_dssdk.ViconDataStream``, or an error saying how to install it."""
    try:
        from vicon_dssdk import ViconDataStream
    except ImportError as exc:
        raise AsapError(
            "Vicon mode needs the Vicon DataStream SDK Python module 'vicon_dssdk', which is not on "
            "PyPI: install Vicon's DataStream SDK, then `pip install <SDK>/Python/vicon_dssdk` into "
            f"this environment (import failed: {exc}). Without Vicon, use mode:=topic to relay "
            "another driver's PoseStamped."
        ) from exc
    return ViconDataStream


@dataclass(frozen=True)
class MocapSample:
    """One unoccluded pose of the tracked segment."""

    frame_number: int
    frame_rate_hz: float
    receive_ns: int
    """time.time_ns() right after GetFrame returned."""
    capture_ns: int
    """receive_ns minus the SDK's total latency: when the cameras saw the pose."""
    position_m: np.ndarray
    quat_wxyz: np.ndarray


@dataclass
class ViconCounters:
    """What the stream delivered, for diagnostics."""

    frames: int = 0
    """Frames fetched (GetFrame succeeded with a new frame number)."""
    occluded: int = 0
    """Frames in which the segment was occluded (no pose published)."""
    dropped: int = 0
    """Frame numbers skipped by the stream (never received)."""
    repeated: int = 0
    """Frames whose number was not newer than the previous one (ignored)."""
    no_frame: int = 0
    """GetFrame calls that returned no frame."""


class ViconSource:
    """Reads one subject segment from a DataStream ``Client`` (the SDK's or a stand-in)."""

    def __init__(self, sdk: Any, client: Any, host: str, subject: str, segment: str, source: str = "<mocap config>"):
        self.sdk = sdk
        self.client = client
        self.host = host
        self.subject = subject
        self.segment = segment
        self.source = source
        self.counters = ViconCounters()
        self._last_frame: int | None = None
        self._subject_checked = False

    @classmethod
    def from_sdk(cls, host: str, subject: str, segment: str, source: str = "<mocap config>") -> ViconSource:
        """A source on the installed Vicon SDK (not yet connected)."""
        sdk = import_vicon_sdk()
        return cls(sdk, sdk.Client(), host, subject, segment, source)

    def open(self) -> None:
        """Connect, enable segment data and ask the server to push every frame."""
        try:
            self.client.Connect(self.host)
            if not self.client.IsConnected():
                raise AsapError(f"Vicon DataStream server at {self.host}: connection not established")
            self.client.EnableSegmentData()
            self.client.SetStreamMode(self.sdk.Client.StreamMode.EServerPush)
        except self.sdk.DataStreamException as exc:
            raise AsapError(f"Vicon DataStream server at {self.host} (from {self.source}: host): {exc}") from exc

    def read(self) -> MocapSample | None:
        """Wait for the next frame; ``None`` if no frame, a repeated frame or an occluded segment."""
        try:
            fetched = self.client.GetFrame()
        except self.sdk.DataStreamException as exc:
            if str(exc) != "NoFrame":
                raise AsapError(f"Vicon DataStream server at {self.host}: GetFrame failed: {exc}") from exc
            fetched = False
        receive_ns = time.time_ns()
        if not fetched:
            self.counters.no_frame += 1
            return None
        frame = int(self.client.GetFrameNumber())
        if self._last_frame is not None and frame <= self._last_frame:
            self.counters.repeated += 1
            return None
        if self._last_frame is not None:
            self.counters.dropped += frame - self._last_frame - 1
        self._last_frame = frame
        self.counters.frames += 1
        self._check_subject()
        try:
            translation, translation_occluded = self.client.GetSegmentGlobalTranslation(self.subject, self.segment)
            rotation, rotation_occluded = self.client.GetSegmentGlobalRotationQuaternion(self.subject, self.segment)
        except self.sdk.DataStreamException as exc:
            raise ConfigError(self.source, "segment", f"Vicon server at {self.host}: {exc}", self.segment) from exc
        if translation_occluded or rotation_occluded:
            self.counters.occluded += 1
            return None
        latency_ns = round(float(self.client.GetLatencyTotal()) * 1e9)
        quat = xyzw_to_wxyz(np.asarray(rotation, dtype=np.float64))
        return MocapSample(
            frame_number=frame,
            frame_rate_hz=float(self.client.GetFrameRate()),
            receive_ns=receive_ns,
            capture_ns=receive_ns - latency_ns,
            position_m=np.asarray(translation, dtype=np.float64) * MM,
            quat_wxyz=quat / np.linalg.norm(quat),
        )

    def _check_subject(self) -> None:
        """On the first frame: the configured subject must be streamed."""
        if self._subject_checked:
            return
        names = list(self.client.GetSubjectNames())
        if self.subject not in names:
            raise ConfigError(
                self.source,
                "subject",
                f"not streamed by the Vicon server at {self.host} (subjects: {names})",
                self.subject,
            )
        self._subject_checked = True
