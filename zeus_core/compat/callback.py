"""Zeus's ``zeus.callback``: :class:`Callback` and :class:`CallbackSet`.

The suite's :class:`~zeus_core.TrainingCallback` has Zeus's six training events and
``on_evaluate``; Zeus's ``Callback`` adds the pipeline instruction events, and ``CallbackSet``
calls every callback in the order given for every event (the suite's ``CallbackList`` ends in
reverse order).

Example:
    >>> from zeus_core.compat.callback import Callback, CallbackSet
    >>> class Say(Callback):
    ...     def __init__(self, name):
    ...         self.name = name
    ...     def on_evaluate(self, metric):
    ...         print(self.name, metric)
    >>> CallbackSet([Say("a"), Say("b")]).on_evaluate(0.9)
    a 0.9
    b 0.9
"""

from __future__ import annotations

from typing import Any, Sequence

from zeus_core.callback import TrainingCallback

__all__ = ["Callback", "CallbackSet"]


class Callback(TrainingCallback):
    """Zeus's callback base: a no-op for every event, pipeline instructions included.

    Example:
        >>> from zeus_core.compat.callback import Callback
        >>> class Steps(Callback):
        ...     steps = 0
        ...     def on_step_end(self):
        ...         self.steps += 1
        >>> cb = Steps(); cb.on_step_begin(); cb.on_step_end(); cb.on_instruction_begin("forward")
        >>> cb.steps
        1
    """

    def on_instruction_begin(self, name: str) -> None:
        """A pipeline instruction (``"forward"``, ``"backward"``) begins; no-op by default."""
        return None

    def on_instruction_end(self, name: str) -> None:
        """A pipeline instruction ends; no-op by default."""
        return None


class CallbackSet(Callback):
    """Calls every callback, in the order given, for each event (Zeus's ``CallbackSet``).

    Callbacks may be Zeus-style or the suite's (an event a callback lacks is skipped).

    Args:
        callbacks: The callbacks.

    Example:
        >>> from zeus_core.compat.callback import Callback, CallbackSet
        >>> class Say(Callback):
        ...     def __init__(self, name):
        ...         self.name = name
        ...     def on_epoch_end(self):
        ...         print(self.name)
        >>> CallbackSet([Say("first"), Say("second")]).on_epoch_end()
        first
        second
    """

    def __init__(self, callbacks: Sequence[Any]) -> None:
        self.callbacks = list(callbacks)

    def _call(self, event: str, *args: Any) -> None:
        for callback in self.callbacks:
            method = getattr(callback, event, None)
            if method is not None:
                method(*args)

    def on_train_begin(self) -> None:
        """``on_train_begin`` of every callback."""
        self._call("on_train_begin")

    def on_train_end(self) -> None:
        """``on_train_end`` of every callback."""
        self._call("on_train_end")

    def on_epoch_begin(self) -> None:
        """``on_epoch_begin`` of every callback."""
        self._call("on_epoch_begin")

    def on_epoch_end(self) -> None:
        """``on_epoch_end`` of every callback."""
        self._call("on_epoch_end")

    def on_step_begin(self) -> None:
        """``on_step_begin`` of every callback."""
        self._call("on_step_begin")

    def on_step_end(self) -> None:
        """``on_step_end`` of every callback."""
        self._call("on_step_end")

    def on_evaluate(self, metric: float) -> None:
        """``on_evaluate(metric)`` of every callback."""
        self._call("on_evaluate", metric)

    def on_instruction_begin(self, name: str) -> None:
        """``on_instruction_begin(name)`` of every callback."""
        self._call("on_instruction_begin", name)

    def on_instruction_end(self, name: str) -> None:
        """``on_instruction_end(name)`` of every callback."""
        self._call("on_instruction_end", name)
