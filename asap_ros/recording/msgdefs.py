"""ROS 2 ``.msg`` definitions of the recorded non-standard types.

``unitree_hg/msg/*`` are the definitions of unitree_ros2's ``unitree_hg`` package; field names,
types and array sizes equal the IDL of ``unitree_sdk2py.idl.unitree_hg`` (checked by the
tests), so the CDR bytes of a DDS ``LowState_``/``LowCmd_`` are also valid ROS 2 CDR of these
messages and are stored unchanged. ``asap_ros/msg/PolicyStep`` and ``ModeTransition`` mirror
:mod:`asap_ros.runtime.step_topics` field for field for the same reason.
"""

from __future__ import annotations

UNITREE_HG: dict[str, str] = {
    "unitree_hg/msg/IMUState": """\
float32[4] quaternion
float32[3] gyroscope
float32[3] accelerometer
float32[3] rpy
int16 temperature
""",
    "unitree_hg/msg/MotorState": """\
uint8 mode
float32 q
float32 dq
float32 ddq
float32 tau_est
int16[2] temperature
float32 vol
uint32[2] sensor
uint32 motorstate
uint32[4] reserve
""",
    "unitree_hg/msg/MotorCmd": """\
uint8 mode
float32 q
float32 dq
float32 tau
float32 kp
float32 kd
uint32 reserve
""",
    "unitree_hg/msg/LowState": """\
uint32[2] version
uint8 mode_pr
uint8 mode_machine
uint32 tick
IMUState imu_state
MotorState[35] motor_state
uint8[40] wireless_remote
uint32[4] reserve
uint32 crc
""",
    "unitree_hg/msg/LowCmd": """\
uint8 mode_pr
uint8 mode_machine
MotorCmd[35] motor_cmd
uint32[4] reserve
uint32 crc
""",
}

ASAP_ROS: dict[str, str] = {
    "asap_ros/msg/PolicyStep": """\
# One control step of the ASAP runtime (published on DDS rt/asap/policy_step).
int64 stamp_ns            # system time (ns) at which this step's LowCmd was written
uint64 control_tick       # control-loop step counter
string mode               # controller mode during the step (PASSIVE, STAND_UP, HOLD, PREPARE, TRACKING, DAMPING)
string motion             # motion (policy) name, '' if none
uint32 episode            # the runtime's episode counter
int32 motion_tick         # control step within the motion (0 first), -1 when not tracking
float32 phase             # ref_motion_phase the actor saw
uint32 lowstate_tick      # LowState.tick the step was computed from
int64 lowstate_stamp_ns   # arrival time (ns) of that LowState
int64 mocap_stamp_ns      # stamp (ns) of the newest mocap sample at the step, 0 if none
float32[] obs             # the actor's observation, exactly as fed to it
float32[] raw_action      # raw actor output, clipped (what goes into the history)
float32[] q_target        # 29 position targets, G1 motor order
int64 compute_ns          # time spent computing the step
int64 latency_ns          # LowCmd write time - LowState arrival time
bool late                 # the step finished past its deadline
bool fault_latched        # DAMPING latched on this step (a fault found in it, or an e-stop since the last step)
""",
    "asap_ros/msg/ModeTransition": """\
# One state-machine transition of the ASAP runtime (published on DDS rt/asap/transition).
int64 stamp_ns
string from_mode
string to_mode
string reason
string motion             # motion at the transition, '' if none
""",
    "asap_ros/msg/Episode": """\
# One motion run, written by the recorder when it ends (PREPARE->TRACKING starts it,
# leaving TRACKING ends it) or when the recording stops during it.
uint32 index              # 1, 2, ... within the session
string motion
int64 start_ns            # stamp of the PREPARE->TRACKING transition
int64 end_ns              # stamp of the transition that left TRACKING, or the stop time
string end_mode           # mode entered (HOLD, DAMPING, ...), '' if the recording stopped first
string end_reason         # reason of that transition, or why the recording stopped
bool estop                # ended in DAMPING (operator e-stop or a safety fault)
bool complete             # ended by a transition (false: cut by the end of the recording)
""",
}

MESSAGE_DEFINITIONS: dict[str, str] = {**UNITREE_HG, **ASAP_ROS}
"""All non-standard recorded types, dependencies first."""
