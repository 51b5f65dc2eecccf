"""The Unitree G1 ``unitree_hg`` protocol: :mod:`.layout` (C and XCDR1 wire layouts, topics),
:mod:`.crc`, :mod:`.codec` (raw samples <-> core types, damping command; no SDK import) and
:mod:`.sdk` (the same for ``unitree_sdk2py`` objects).
"""
