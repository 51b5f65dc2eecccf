"""``asap-ros view``: a read-only web view of the robot, live (DDS + ROS topics) or from a bag.

One page (:mod:`.page`, built on viser) shows a :class:`~.snapshot.Snapshot`; the live feed
(:mod:`.live`) and a recorded session (:mod:`.replay`) each produce them.
"""
