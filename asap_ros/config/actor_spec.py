"""Loads a trainer actor's spec (written by ``asap-ros policy import``, key ``trainer``) into an
:class:`~asap_ros.core.actor_contract.ActorContract`, every value bound to a motor by joint name
and checked against the robot model; errors name the file, the key (with the joint) and the value.

The format: ``name``, ``trainer`` (asap | beyondmimic | holosoma), ``actor`` (``file`` absolute or
relative to the spec, ``sha256``, ``external_data`` [{file, sha256}], ``inputs`` [{name, dim}],
``output``), ``joints`` (the actor's order), ``kp``/``kd``/``default_q`` (joint: value; joints not
named keep the robot model's), ``action`` (``scale``: a number or joint: value; ``clip``: a number
or null), ``observation`` (``order``: listed | alphabetical; ``terms`` [{name, dim, scale}];
``history`` for ASAP's layout), ``control_dt`` (s), optional ``motion`` (``steps`` in the model or
``length_s``), ``commands`` (name: [low, high]), ``gait`` (``period_s``) and ``sources`` (where each
value came from; not read).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from asap_ros.config.policy_spec import sha256_of
from asap_ros.config.reader import ConfigReader, load_config
from asap_ros.config.robot import load_robot_model
from asap_ros.core.actor_contract import (
    ActorContract,
    bind_joints,
    check_obs_dims,
    check_per_joint,
    require_all_motors,
)  # fmt: skip
from asap_ros.core.policy_spec import ObsTerm
from asap_ros.core.robot import RobotModel
from asap_ros.core.trainer_obs import MOCAP_TERMS

TRAINERS = ("asap", "beyondmimic", "holosoma")
_TOP = {"name", "trainer", "actor", "joints", "kp", "kd", "default_q", "action", "observation", "motion",
        "commands", "gait", "control_dt", "sources"}  # fmt: skip


def is_actor_spec(path: str | Path) -> bool:
    """A spec of this format (it names its ``trainer``), not one of ``policies/*.yaml``'s."""
    data = load_config(path).data
    return isinstance(data, dict) and "trainer" in data


def _file(cfg: ConfigReader, key: str, base: Path) -> tuple[Path, str]:
    path = Path(cfg.str(key))
    path = path if path.is_absolute() else base / path
    if not path.is_file():
        raise cfg.error(key, "file not found", str(path))
    expected, actual = cfg.str("sha256").lower(), sha256_of(path)
    if expected != actual:
        raise cfg.error("sha256", f"does not match {path} (file has {actual})", expected)
    return path, actual


def _terms(obs: ConfigReader) -> list[ObsTerm]:
    obs.reject_unknown({"order", "terms", "history"})
    order = obs.str("order", choices={"listed", "alphabetical"})
    terms = []
    for term in obs.sections("terms"):
        term.reject_unknown({"name", "dim", "scale"})
        terms.append(ObsTerm(term.str("name"), term.int("dim", low=1), term.float("scale")))
    names = [t.name for t in terms]
    if order == "alphabetical" and names != sorted(names):
        raise obs.error("terms", "order is alphabetical but the terms are not sorted by name", names)
    if obs.has("history"):
        history = obs.section("history")
        history.reject_unknown({"name", "length", "order"})
        history.str("order", choices={"newest_first"})
        width = history.int("length", low=1) * sum(t.dim for t in terms)
        terms = sorted([*terms, ObsTerm(history.str("name"), width, 1.0)], key=lambda t: t.name)
    return terms


def _per_joint(cfg: ConfigReader, key: str, joints: tuple[str, ...], robot: RobotModel,
               base: np.ndarray) -> np.ndarray:  # fmt: skip
    values = cfg.joint_values(key, robot.joint_names)
    missing = [j for j in joints if j not in values]
    if missing:
        raise cfg.error(key, "no value for actor joint", missing[0])
    check_per_joint(list(values.values()), list(values), robot, cfg.file, key)
    out = base.copy()
    for joint, value in values.items():
        out[robot.index(joint)] = value
    return out


def load_actor_spec(path: str | Path, robot: RobotModel | None = None) -> ActorContract:
    """Load and check a trainer actor's spec (the model file itself is checked by its SHA-256)."""
    path = Path(path)
    robot = robot or load_robot_model()
    cfg = load_config(path)
    cfg.reject_unknown(_TOP)
    trainer = cfg.str("trainer", choices=set(TRAINERS))
    actor = cfg.section("actor")
    actor.reject_unknown({"file", "sha256", "external_data", "inputs", "output"})
    actor_path, actor_sha = _file(actor, "file", path.parent)
    external = tuple(_file(e, "file", actor_path.parent) for e in actor.sections("external_data")) \
        if actor.raw("external_data", []) else ()  # fmt: skip
    inputs = []
    for item in actor.sections("inputs"):
        item.reject_unknown({"name", "dim"})
        inputs.append((item.str("name"), item.int("dim", low=1)))
    if not inputs:
        raise actor.error("inputs", "at least the observation input is needed")
    if trainer == "beyondmimic" and [n for n, _ in inputs][1:] != ["time_step"]:
        raise actor.error("inputs", "a BeyondMimic actor takes the observation and time_step", [n for n, _ in inputs])

    joints = cfg.strs("joints")
    indices = bind_joints(joints, robot, path, "joints")
    if trainer != "asap":
        require_all_motors(joints, robot, path, "joints")
    kp = _per_joint(cfg, "kp", joints, robot, robot.kp)
    kd = _per_joint(cfg, "kd", joints, robot, robot.kd)
    default_q = _per_joint(cfg, "default_q", joints, robot, robot.default_q)

    action = cfg.section("action")
    action.reject_unknown({"scale", "clip"})
    if isinstance(action.raw("scale"), dict):
        scales = action.joint_values("scale", joints)
        missing = [j for j in joints if j not in scales]
        if missing:
            raise action.error("scale", "no value for actor joint", missing[0])
        scale = np.array([scales[j] for j in joints])
    else:
        scale = np.full(len(joints), action.float("scale"))
    for joint, value in zip(joints, scale):
        if not 0.0 < value <= 1.0:
            raise action.error(f"scale.{joint}", "must be in (0, 1] rad per unit of actor output", float(value))
    clip = None if action.raw("clip") is None else action.float("clip", low=1e-6, high=100.0)

    terms = _terms(cfg.section("observation"))
    check_obs_dims(terms, inputs[0][1], path, "observation.terms")
    motion = cfg.section("motion", {})
    motion.reject_unknown({"steps", "length_s", "anchor_body", "anchor_index"})
    control_dt = cfg.float("control_dt", low=1e-3, high=0.1)
    steps: int | None = None
    if motion.has("steps"):
        steps = motion.int("steps", low=1)
    elif motion.has("length_s"):
        steps = int(math.floor(motion.float("length_s", low=control_dt) / control_dt + 0.5))
    commands = cfg.section("commands", {})
    ranges = []
    for name in commands.data:
        low, high = commands.floats(str(name), length=2)
        if not low <= 0.0 <= high:
            raise commands.error(str(name), "must be [low, high] with low <= 0 <= high", [low, high])
        ranges.append((str(name), float(low), float(high)))
    if trainer == "beyondmimic" and not motion.has("anchor_index"):
        raise motion.error("anchor_index", "a BeyondMimic actor needs its anchor body's index in body_names")
    gait = cfg.section("gait", {})
    gait.reject_unknown({"period_s"})

    contract = ActorContract(
        name=cfg.str("name"), source=path, trainer=trainer, actor_path=actor_path, actor_sha256=actor_sha,
        external_data=external, inputs=tuple(inputs), action_output=actor.str("output"), joints=joints,
        motor_indices=indices, terms=tuple(terms), default_q=default_q, kp=kp, kd=kd, action_scale_actor=scale,
        action_clip=clip, control_dt=control_dt, motion_steps=steps, command_ranges=tuple(ranges),
        gait_period_s=gait.float("period_s", low=0.1) if gait.has("period_s") else None,
        needs_mocap=any(t.name in MOCAP_TERMS for t in terms),
        anchor_index=motion.int("anchor_index", low=0) if motion.has("anchor_index") else None,
    )  # fmt: skip
    for array in (contract.motor_indices, contract.default_q, contract.kp, contract.kd, contract.action_scale_actor):
        array.setflags(write=False)
    return contract
