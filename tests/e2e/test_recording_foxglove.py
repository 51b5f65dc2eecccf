"""Foxglove-ready bags: ``config/foxglove_layout.json`` names only topics (and fields) that a bag
recorded with ``asap-ros sim --record`` holds, read with the independent ``mcap`` reader and
its ROS 2 decoder; the robot description in the bag is a URDF with the G1's 29 motor joints,
whose transforms the bag carries on /tf."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest

from asap_ros.config.paths import config_file
from asap_ros.config.robot import load_robot_model

LAYOUT = "foxglove_layout.json"
TOPIC_KEYS = ("value", "topicPath", "topic", "topicToRender")
PATH = re.compile(r"^(/[A-Za-z0-9_/]+?)((?:\.[A-Za-z_]\w*|\[\d+\])*)$")


def layout_paths(node: object) -> Iterator[str]:
    """Every message path the layout names (plot series, panel topics, the URDF source, 3D topics)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in TOPIC_KEYS and isinstance(value, str) and value.startswith("/"):
                yield value
            elif key == "topics" and isinstance(value, dict):
                yield from value
            else:
                yield from layout_paths(value)
    elif isinstance(node, list):
        for item in node:
            yield from layout_paths(item)


def resolve(message: object, accessors: str) -> object:
    """``.a.b[3]`` applied to a decoded message."""
    for name, index in re.findall(r"\.(\w+)|\[(\d+)\]", accessors):
        message = getattr(message, name) if name else message[int(index)]
    return message


def decoded_messages(bag: Path) -> Iterator[tuple[str, object]]:
    """(topic, message) of every message of the bag, decoded by mcap's own ROS 2 decoder."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    for file in sorted(bag.glob("*.mcap")):
        with file.open("rb") as stream:
            reader = make_reader(stream, decoder_factories=[DecoderFactory()])
            for _schema, channel, _message, decoded in reader.iter_decoded_messages():
                yield channel.topic, decoded


@pytest.fixture(scope="module")
def layout_check(sim_session_bag: Path) -> tuple[dict[str, int], dict[str, object], set[str]]:
    """Message counts and first messages per topic, and the layout's paths that no message of
    their topic has (one pass over the bag with mcap's reader)."""
    layout = json.loads(config_file(LAYOUT).read_text())
    paths = sorted(set(layout_paths(layout["configById"])))
    unresolved: dict[str, dict[str, str]] = {}
    for path in paths:
        match = PATH.match(path)
        assert match, f"{LAYOUT}: {path!r} is not a topic or message path"
        unresolved.setdefault(match.group(1), {})[path] = match.group(2)
    counts: dict[str, int] = {}
    first: dict[str, object] = {}
    for topic, message in decoded_messages(sim_session_bag):
        counts[topic] = counts.get(topic, 0) + 1
        first.setdefault(topic, message)
        for path, accessors in list(unresolved.get(topic, {}).items()):
            try:
                resolve(message, accessors)
            except (AttributeError, IndexError):
                continue  # e.g. raw_action is empty while no motion runs
            del unresolved[topic][path]
    return counts, first, {p for by_topic in unresolved.values() for p in by_topic}


@pytest.fixture(scope="module")
def first_messages(layout_check) -> dict[str, tuple[int, object]]:
    counts, first, _ = layout_check
    return {topic: (counts[topic], first[topic]) for topic in counts}


def test_every_path_of_the_layout_is_in_the_recorded_bag(layout_check):
    counts, _, missing = layout_check
    layout = json.loads(config_file(LAYOUT).read_text())
    paths = set(layout_paths(layout["configById"]))
    assert {"/robot_description", "/tf", "/joint_states.position[3]", "/asap/policy_step.q_target[3]"} <= paths
    absent = {p for p in paths if PATH.match(p).group(1) not in counts}
    assert not absent, f"{LAYOUT} names topics the bag does not have: {sorted(absent)} (topics: {sorted(counts)})"
    assert not missing, f"{LAYOUT}: no message of the bag has {sorted(missing)}"


def test_the_robot_description_is_a_urdf_with_the_29_motor_joints(first_messages):
    count, description = first_messages["/robot_description"]
    assert count == 1
    robot = ET.fromstring(description.data)
    joints = {j.get("name"): j for j in robot.iter("joint")}
    links = {link.get("name") for link in robot.iter("link")}
    motors = load_robot_model().joint_names
    assert len(motors) == 29
    for name in motors:
        joint = joints[name]
        assert joint.get("type") == "revolute", name
        assert joint.find("axis") is not None and joint.find("limit") is not None, name
        assert {joint.find("parent").get("link"), joint.find("child").get("link")} <= links, name
    meshes = [urlparse(m.get("filename")) for m in robot.iter("mesh")]
    assert meshes and all(m.scheme == "file" and Path(url2pathname(m.path)).is_file() for m in meshes)


def test_tf_carries_every_motor_joint_and_the_root(first_messages):
    description = ET.fromstring(first_messages["/robot_description"][1].data)
    children = {j.get("name"): j.find("child").get("link") for j in description.iter("joint")}
    count, tf = first_messages["/tf"]
    frames = {t.child_frame_id: t.header.frame_id for t in tf.transforms}
    assert frames["pelvis"] == "world"
    assert {children[name] for name in load_robot_model().joint_names} <= set(frames)
    static = {t.child_frame_id for t in first_messages["/tf_static"][1].transforms}
    fixed = {j.find("child").get("link") for j in description.iter("joint") if j.get("type") == "fixed"}
    assert static == fixed
    joint_count, joints = first_messages["/joint_states"]
    assert list(joints.name) == list(load_robot_model().joint_names) and len(joints.position) == 29
    lowstates = first_messages["/lowstate"][0]
    assert 0.08 < count / lowstates < 0.12, "about 50 Hz of /tf per 500 Hz of LowState"
    assert joint_count == count
