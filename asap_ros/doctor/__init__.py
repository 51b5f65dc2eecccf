"""``asap-ros doctor``: preflight checks against what the robot actually sends.

One module per concern (network, LowState stream, ``rt/lowcmd`` writers, ROS graph, assets and
policies, clock), each returning :class:`~asap_ros.doctor.report.Check` results;
:mod:`asap_ros.doctor.run` runs the selected ones. Nothing here ever writes ``rt/lowcmd``: the
bus checks create readers only.
"""
