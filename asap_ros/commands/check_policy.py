"""``asap-ros check-policy SPEC``: verify a policy spec against its actor and run it once."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "spec", help="policy spec file, or the name of one in the package's policies/ (e.g. CR7_level1)"
    )
    parser.add_argument("--assets-dir", default=None, help="ASAP asset root (default: the usual search)")
    parser.add_argument("--robot", default=None, help="robot model YAML (default: config/g1_29dof.yaml)")


def resolve_spec_path(spec: str) -> Path:
    """A path as given if it exists, else ``policies/<spec>.yaml`` of the package."""
    from asap_ros.config.paths import policies_dir

    path = Path(spec)
    if path.exists() or path.suffix in (".yaml", ".yml"):
        return path
    return policies_dir() / f"{spec}.yaml"


def _check_actor_spec(path: Path, robot) -> int:
    """A trainer actor's spec (``policy import``): the joint binding, the layout, one zero step."""
    import numpy as np

    from asap_ros.config.actor_spec import load_actor_spec
    from asap_ros.runtime.trainer_actor import TrainerActor

    contract = load_actor_spec(path, robot)
    actor = TrainerActor(contract)
    action = actor(np.zeros(contract.obs_dim, dtype=np.float32), 0)
    print(f"spec:    {path} ({contract.name}, trainer {contract.trainer})")
    print(f"actor:   {contract.actor_path}")
    print(f"sha256:  {contract.actor_sha256} ok")
    for data, digest in contract.external_data:
        print(f"weights: {data} sha256 {digest} ok")
    inputs = ", ".join(f"{n} [1, {d}]" for n, d in contract.inputs)
    print(f"onnx:    {inputs} -> {contract.action_output} [1, {len(contract.joints)}] ok")
    motion = f"{contract.motion_steps} steps ({contract.motion_steps * contract.control_dt:.2f} s)" \
        if contract.motion_steps else "none (standing or locomotion actor)"  # fmt: skip
    print(f"motion:  {motion}")
    if contract.needs_mocap:
        print("mocap:   required (anchor position and base velocity in the observation)")
    print("joints (actor index -> motor, kp, kd, default_q, action scale):")
    for i, (joint, motor) in enumerate(zip(contract.joints, contract.motor_indices)):
        print(f"  {i:2d} {joint:<27} motor {motor:2d}  kp {contract.kp[motor]:7.3f}  kd {contract.kd[motor]:6.3f}  "
              f"q0 {contract.default_q[motor]:+.3f}  scale {contract.action_scale_actor[i]:.3f}")
    print("observation layout:")
    offset = 0
    for term in contract.terms:
        print(f"  {offset:4d} {term.name:<20} {term.dim:4d}  scale {term.scale:g}")
        offset += term.dim
    print(f"  total {offset} = actor input {contract.inputs[0][1]}")
    print(f"action on the zero observation: min {action.min():+.4f} max {action.max():+.4f}")
    if not np.all(np.isfinite(action)):
        print("error: the actor returned non-finite values on the zero observation")
        return 2
    return 0


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from asap_ros.config.robot import load_robot_model
    from asap_ros.runtime.policies import run_zero_observation

    robot = load_robot_model(args.robot)
    path = resolve_spec_path(args.spec)
    from asap_ros.config.actor_spec import is_actor_spec

    if path.is_file() and is_actor_spec(path):
        return _check_actor_spec(path, robot)
    spec, action = run_zero_observation(resolve_spec_path(args.spec), robot, args.assets_dir)

    print(f"spec:    {spec.source} ({spec.name})")
    print(f"actor:   {spec.actor_path}")
    print(f"sha256:  {spec.actor_sha256} ok")
    print(f"onnx:    {spec.input_name} [1, {spec.input_dim}] -> {spec.output_name} [1, {spec.output_dim}] ok")
    print(f"joints:  {len(spec.driven_joints)} driven: {', '.join(spec.driven_joints)}")
    if spec.is_motion:
        print(f"clip:    {spec.clip_path.name} ({spec.clip_duration_s:.3f} s; phase step {spec.control_dt} s)")
    else:
        print("clip:    none (standing actor: runs until the controller leaves HOLD)")
    print("observation layout:")
    scales = {t.name: t.scale for t in spec.terms}
    for block in spec.layout:
        if block.name in scales:
            detail = f"scale {scales[block.name]:g}"
        else:
            history = spec.history
            order = "newest first" if history.newest_first else "oldest first"
            detail = f"{history.length} steps of {', '.join(history.terms)}, {order}"
        print(f"  {block.offset:4d} {block.name:<20} {block.dim:4d}  {detail}")
    print(f"  total {sum(b.dim for b in spec.layout)} = actor input {spec.input_dim}")
    print(
        f"action on the zero observation: min {action.min():+.4f} max {action.max():+.4f} "
        f"(scale {spec.action_scale:g}, clip +-{spec.action_clip:g})"
    )
    if not np.all(np.isfinite(action)):
        print("error: the actor returned non-finite values on the zero observation")
        return 2
    return 0
