"""The rosbags typestore used to write and read recordings: ROS 2 Kilted types plus ours."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache, lru_cache

from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from asap_ros.recording.msgdefs import MESSAGE_DEFINITIONS

ROS_DISTRO = "kilted"


@lru_cache(maxsize=1)
def recording_typestore() -> Typestore:
    """Kilted's standard messages plus ``unitree_hg/msg/*`` and ``asap_ros/msg/*``."""
    store = get_typestore(Stores.ROS2_KILTED)
    for name, text in MESSAGE_DEFINITIONS.items():
        store.register(get_types_from_msg(text, name))
    return store


@cache
def schema_of(msgtype: str) -> tuple[str, str]:
    """``(message definition, RIHS01 hash)`` of a type: the ``ros2msg`` text with its
    dependencies appended (the rosbag2/MCAP schema format) and the ROS 2 type hash."""
    store = recording_typestore()
    if msgtype not in store.fielddefs:
        raise KeyError(f"unknown message type {msgtype!r}")
    text, _ = store.generate_msgdef(msgtype, ros_version=2)
    return text, store.hash_rihs01(msgtype)


def bag_typestore(definitions: Mapping[str, str]) -> Typestore:
    """The typestore that decodes a bag: :func:`recording_typestore`, except that each of our
    types whose definition the bag embeds differently (a bag recorded by an older version, e.g.
    a ``PolicyStep`` without ``fault_latched``) is read with the bag's own definition.

    ``definitions``: ``{msgtype: embedded ros2msg text}`` of the bag's topics.
    """
    older = {
        name: text for name, text in definitions.items()
        if name in MESSAGE_DEFINITIONS and text.strip() != schema_of(name)[0].strip()
    }  # fmt: skip
    if not older:
        return recording_typestore()
    return _typestore_with(tuple(sorted(older.items())))


@lru_cache(maxsize=8)
def _typestore_with(older: tuple[tuple[str, str], ...]) -> Typestore:
    store = get_typestore(Stores.ROS2_KILTED)
    for name, text in older:
        store.register(get_types_from_msg(text, name))
    for name, text in MESSAGE_DEFINITIONS.items():
        if name not in store.fielddefs:
            store.register(get_types_from_msg(text, name))
    return store
