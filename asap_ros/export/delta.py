"""``--format delta``: aligned (s_t, a_t, s_t+1) transitions for delta-action training.

One row per transition of :mod:`asap_ros.export.pairing`: s_t the state actor step t saw, a_t
the action computed from it, s_t+1 the state step t+1 saw. A missing tick breaks the pair and a
step whose fault latched is never a_t, so every row is a real one-step transition under an
executed action; ``terminate`` marks the one into the episode's last state. The state is given
raw (SI units, driven joints in clip ``dof`` order) and as ASAP's 108-dim open-loop delta-model
input, with NaN in the terms a recording cannot provide. The schema (names, shapes, units,
sources) is in ``docs/export.md``; :data:`DELTA_INPUT_TERMS` is the authoritative layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.export.align import AlignedEpisode
from asap_ros.export.formats import ExportContext, write_npz
from asap_ros.export.pairing import transitions
from asap_ros.tracking.kinematics import NUM_DRIVEN

SUFFIX = ".delta.npz"


@dataclass(frozen=True)
class InputTerm:
    """One term of the delta model's input: name, width, scale, and where it comes from."""

    name: str
    dim: int
    scale: float
    source: str
    """``None``-like sources (``not recorded``) mean the term cannot be derived from a bag."""


NOT_RECORDED = "not recorded"
DELTA_INPUT_TERMS: tuple[InputTerm, ...] = (
    InputTerm("actions", NUM_DRIVEN, 1.0, NOT_RECORDED + ": the delta model's own previous output"),
    InputTerm("actions_open_loop", NUM_DRIVEN, 1.0, "a_t, as the action key (--action)"),
    InputTerm("base_ang_vel", 3, 0.25, "IMU gyroscope, body frame"),
    InputTerm("base_lin_vel", 3, 2.0, "mocap, finite difference, body frame"),
    InputTerm("base_pos_z", 1, 1.0, "mocap pelvis height"),
    InputTerm("dof_pos", NUM_DRIVEN, 1.0, "LowState q - default_q"),
    InputTerm("dof_vel", NUM_DRIVEN, 0.05, "LowState dq"),
    InputTerm("feet_contact_force", 6, 0.01, NOT_RECORDED + ": the G1 (hg LowState) has no foot force sensors"),
    InputTerm("projected_gravity", 3, 1.0, "IMU quaternion"),
)
DELTA_INPUT_DIM = sum(term.dim for term in DELTA_INPUT_TERMS)


def term_offset(name: str) -> tuple[int, float]:
    """Where term ``name`` starts in the 108 inputs, and its scale."""
    at = 0
    for term in DELTA_INPUT_TERMS:
        if term.name == name:
            return at, term.scale
        at += term.dim
    raise KeyError(name)
STATE_KEYS = ("dof_pos", "dof_vel", "base_pos", "base_quat_wxyz", "base_lin_vel", "base_ang_vel", "projected_gravity")


def raw_state(aligned: AlignedEpisode, ctx: ExportContext) -> dict[str, np.ndarray]:
    """Per-tick state in SI units (NaN for what needs mocap when the bag has none)."""
    rows = len(aligned)
    driven = ctx.driven_motors
    nan3 = np.full((rows, 3), np.nan)
    return {
        "dof_pos": aligned.q[:, driven],
        "dof_vel": aligned.dq[:, driven],
        "base_pos": aligned.root_pos if aligned.root_pos is not None else nan3,
        "base_quat_wxyz": aligned.root_quat_wxyz,
        "base_lin_vel": aligned.root_lin_vel_body if aligned.root_lin_vel_world is not None else nan3,
        "base_ang_vel": aligned.gyro,
        "projected_gravity": aligned.projected_gravity,
    }


def delta_input(aligned: AlignedEpisode, ctx: ExportContext, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(K, 108) model input per tick (scaled, NaN where not derivable) and the (108,) availability
    mask; ``action``: (K, 23) the action column per tick (a faulted step's is not derivable)."""
    state = raw_state(aligned, ctx)
    rows = len(aligned)
    open_loop = np.where(aligned.episode.steps.fault_latched[:, None], np.nan, action.astype(np.float64))
    values = {
        "actions_open_loop": open_loop,
        "base_ang_vel": state["base_ang_vel"],
        "base_lin_vel": state["base_lin_vel"],
        "base_pos_z": state["base_pos"][:, 2:3],
        "dof_pos": state["dof_pos"] - ctx.robot.default_q[ctx.driven_motors],
        "dof_vel": state["dof_vel"],
        "projected_gravity": state["projected_gravity"],
    }
    blocks, available = [], []
    for term in DELTA_INPUT_TERMS:
        block = values.get(term.name)
        block = np.full((rows, term.dim), np.nan) if block is None else block * term.scale
        blocks.append(block)
        available.append(np.full(term.dim, not np.isnan(block[~aligned.episode.steps.fault_latched]).any()))
    return np.concatenate(blocks, axis=1).astype(np.float32), np.concatenate(available)


def transition_arrays(aligned: AlignedEpisode, ctx: ExportContext) -> dict[str, np.ndarray]:
    """All keys of the delta file (see docs/export.md)."""
    pairs = transitions(aligned, continuous=False)
    rows, after = pairs.action, pairs.result
    state = raw_state(aligned, ctx)
    action, executed = ctx.actions(aligned.raw_action, aligned.q_target)
    model_input, available = delta_input(aligned, ctx, action)
    arrays: dict[str, np.ndarray] = {
        "tick": aligned.tick[rows],
        "time": aligned.time_ns[rows] / 1e9,
        "phase": aligned.phase[rows],
        "action": action[rows],
        "action_executed": executed[rows],
        "q_target": aligned.q_target[rows][:, ctx.driven_motors],
        "terminate": pairs.terminate,
        "delta_input": model_input[rows],
        "next_delta_input": model_input[after],
        "delta_input_available": available,
        "delta_input_terms": np.array([t.name for t in DELTA_INPUT_TERMS]),
        "delta_input_dims": np.array([t.dim for t in DELTA_INPUT_TERMS]),
        "delta_input_scales": np.array([t.scale for t in DELTA_INPUT_TERMS]),
        "joint_names": np.array(ctx.driven_names),
        "root_source": np.array(aligned.root_source),
    }
    for key in STATE_KEYS:
        arrays[key] = state[key][rows]
        arrays[f"next_{key}"] = state[key][after]
    return arrays


def write_delta(aligned: AlignedEpisode, stem: Path, ctx: ExportContext) -> Path:
    """``<stem>.delta.npz``."""
    return write_npz(transition_arrays(aligned, ctx), stem, SUFFIX)
