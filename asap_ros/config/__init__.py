"""Files in, validated data out; every error names file, key and value.

:mod:`.reader` (YAML and typed readers, the one number check), :mod:`.paths` (the package's
``config/`` and ``policies/``), :mod:`.assets` (ASAP's published files), :mod:`.clip` (motion
clips), :mod:`.robot`, :mod:`.policy_spec` and :mod:`.controller` (loaders of the core's data),
:mod:`.node_params` (node parameter schemas).
"""
