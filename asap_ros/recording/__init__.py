"""Recording robot sessions as rosbag2 bags of MCAP files, and inspecting/repairing them.

Modules: :mod:`.msgdefs` (message definitions), :mod:`.typestore` (rosbags typestore with
them), :mod:`.topics` (what is recorded under which name), :mod:`.bag_writer` (rosbag2 bag of
MCAP files with flush and rotation), :mod:`.metadata` (``metadata.yaml``), :mod:`.episodes`,
:mod:`.disk_guard`, :mod:`.session_info`, :mod:`.config`, :mod:`.dds_source` and
:mod:`.ros_bridge` (message sources), :mod:`.recorder` (the recorder), :mod:`.mcap_scan`,
:mod:`.info` and :mod:`.repair` (``asap-ros bag info|repair``).
"""
