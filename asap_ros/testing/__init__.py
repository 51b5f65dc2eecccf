"""Test support, importable by the tests and the benchmarks (never used at run time): stand-ins
for what cannot exist here, each implementing the real API surface.

:mod:`.vicon_standin` (the Vicon DataStream SDK) and :mod:`.vicon_script` (a known trajectory
for it), :mod:`.synthetic_bags` (session bags of a known motion), :mod:`.sim_sessions`
(recorded simulated sessions), :mod:`.session_publisher` (a G1/runtime publisher with
checkable values), :mod:`.ros_system` (the end-to-end ``System``: simulator, deploy and
supervisor processes, an rt/lowcmd observer, rclpy calls), :mod:`.actors` (doubles for
what a trained actor cannot be made to do: corrupted output), :mod:`.view_process`
(``asap-ros view`` as a process) and :mod:`.browser` (a headless Chromium on a view page and
the screenshot checks).
"""
