"""Hand-off to offline trainers: recorded session bags -> trainer formats, tracking metrics, sim-to-real gap.

Reading: :mod:`.mcap_index` (indexed time-range reads), :mod:`.cdr_columns` (bulk CDR
decoding), :mod:`.bag` (episodes and their streams), :mod:`.episode` (the data model).
Control ticks: :mod:`.resample`, :mod:`.align`. Writers: :mod:`.asap_clip`, :mod:`.npz_log`,
:mod:`.delta` (with :mod:`.pose_aa`, :mod:`.formats`), driven by :mod:`.exporter`.
:mod:`.episode_metrics` (``asap-ros metrics``), :mod:`.gap` + :mod:`.gap_report` (``asap-ros gap``),
:mod:`.clips`, :mod:`.progress`, :mod:`.parallel` (test data: :mod:`asap_ros.testing`).
Formats and methods: ``docs/export.md``.
"""
