"""Deprecated: ``from zeus_core import get_gpus`` (or ``from zeus_core.device import get_gpus``)."""

from zeus_core._deprecation import moved
from zeus_core.device._discovery import get_gpus

__all__ = ["get_gpus"]

moved(__name__, "from zeus_core import get_gpus")
