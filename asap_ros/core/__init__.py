"""The control step and nothing else (numpy and the standard library only, no I/O, no threads).

:mod:`.state` (``RobotState``, ``JointCommand``), :mod:`.robot` (the robot model as data),
:mod:`.policy_spec` (a policy spec as data), :mod:`.state_machine`, :mod:`.safety` (fault
checks), :mod:`.observation` (observation builder), :mod:`.policy` (``PolicyRunner`` around any
``actor(obs) -> action``), :mod:`.controller` (modes, blends, one command per step),
:mod:`.remote` (wireless-remote combos), :mod:`.quaternion`, :mod:`.errors`. Nothing here opens
a file: :mod:`asap_ros.config` loads the data, :mod:`asap_ros.runtime.policies` builds runners
and the controller.
"""
