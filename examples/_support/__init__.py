"""Support code of the examples (CPU shims, simulated GPU work, local ranks); not installed.

The examples import it as ``_support`` (their folder is first on ``sys.path`` when run as
``python examples/<name>.py``).
"""
