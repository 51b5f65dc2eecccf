"""Simulator-only DDS topics (cyclonedds IDL structs): ground truth out, control in.

``rt/asap_sim/ground_truth``: one :class:`GroundTruth_` per published LowState (same tick).
``rt/asap_sim/control``: :class:`SimControl_` requests (band lower/raise/release/attach,
wireless-remote buttons).
"""


from dataclasses import dataclass

import cyclonedds.idl.annotations as annotate
import cyclonedds.idl.types as types
from cyclonedds.idl import IdlStruct

GROUND_TRUTH_TOPIC = "rt/asap_sim/ground_truth"
CONTROL_TOPIC = "rt/asap_sim/control"

BAND_LOWER = "band_lower"
"""Lengthen the band by ``value`` metres (0: the configured step)."""
BAND_RAISE = "band_raise"
"""Shorten the band by ``value`` metres (0: the configured step)."""
BAND_RELEASE = "band_release"
BAND_ATTACH = "band_attach"
REMOTE_BUTTONS = "remote_buttons"
"""Press exactly these wireless-remote buttons: ``value`` is the 16-bit button field of
``LowState.wireless_remote`` (bytes 2-3, see :mod:`asap_ros.core.remote`); 0 releases them all."""
CONTROL_ACTIONS = (BAND_LOWER, BAND_RAISE, BAND_RELEASE, BAND_ATTACH, REMOTE_BUTTONS)


@dataclass
@annotate.final
class GroundTruth_(IdlStruct, typename="asap_sim.msg.dds_.GroundTruth_"):
    tick: types.uint32
    """The LowState tick published with this sample."""
    stamp_ns: types.int64
    """System time (ns) at which that LowState was published."""
    sim_time: types.float64
    pelvis_pos: types.array[types.float64, 3]
    pelvis_quat_wxyz: types.array[types.float64, 4]
    q: types.array[types.float64, 29]
    tau: types.array[types.float64, 29]
    """Torque the motors applied (after limits and profile strength)."""
    band_enabled: bool


@dataclass
@annotate.final
class SimControl_(IdlStruct, typename="asap_sim.msg.dds_.SimControl_"):
    action: str
    value: types.float64
