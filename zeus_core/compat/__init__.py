"""Zeus 0.16's import paths over Zeus Suite: a Zeus user changes import lines and nothing else.

One module here per Zeus module, each a thin layer over the suite's real implementation, giving
Zeus's arguments, defaults, units and meanings (``zeus.monitor`` -> ``zeus_core.compat.monitor``,
``zeus.device`` -> ``zeus_core.compat.device``, ...). Where the suite differs on purpose (its
``Measurement.total_energy`` counts CPU and DRAM, its device API is in W and J), its own API stays
as it is and the Zeus shape lives here. docs/migrating.md maps every Zeus import path to one place
and lists the deliberate differences.

Nothing is imported here: each module loads what it needs.

Example:
    >>> import zeus_core.compat, sys
    >>> "torch" in sys.modules or "zeus_core.compat.monitor" in sys.modules
    False
"""
