"""Tracking evaluation, shared by the sim summary and ``asap-ros metrics``: :mod:`.kinematics`
(MuJoCo forward kinematics of ASAP's keypoints, clip sampling, start alignment),
:mod:`.metrics` (E_g-mpjpe, E_mpjpe, E_vel, E_acc) and :mod:`.evaluation` (a run's trace
against its clip).
"""
