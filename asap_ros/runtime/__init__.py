"""The control step at run time: :mod:`.actor` (ONNX Runtime actor), :mod:`.policies` (runners
and controller from files), :mod:`.control_loop` (the real-time thread), :mod:`.dds` (raw
readers and writers), :mod:`.step_topics` (``rt/asap/*`` for the recorder), :mod:`.wiring`
(rt/lowstate -> loop -> rt/lowcmd -> step publisher, used by ``asap_deploy`` and ``asap-ros sim``)
the rt/lowcmd lease (:mod:`.lease` its rules, :mod:`.arbitration` on DDS, :mod:`.watchdog` the
supervisor's side).
"""
