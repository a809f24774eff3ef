"""The training protocol: the only contract between framework adapters and the core.

Adapters (Lightning, Hugging Face, Accelerate, pipeline hooks) translate their framework's
events into these six calls; optimizers and measurers implement them. Any object with these
methods works (structural typing); :class:`TrainingCallback` gives no-op defaults to subclass.

Order of events for one fit::

    on_train_begin
      on_epoch_begin
        on_step_begin, on_step_end      (once per optimizer step, not per micro-batch)
        ...
      on_epoch_end
      ...
    on_train_end                        (exactly once, also when training fails)
"""

from __future__ import annotations

from typing import Iterable, Protocol, runtime_checkable

__all__ = ["TrainingProtocol", "TrainingCallback", "CallbackList"]


@runtime_checkable
class TrainingProtocol(Protocol):
    """What an adapter drives. Steps are optimizer steps.

    Each event has a no-op body (``return None``, not ``...``) so that :class:`TrainingCallback`
    inherits working defaults and type checkers do not take the events for abstract methods.

    Example:
        >>> from zeus_core import TrainingProtocol
        >>> class Counter:
        ...     def on_train_begin(self): pass
        ...     def on_epoch_begin(self): pass
        ...     def on_step_begin(self): pass
        ...     def on_step_end(self): pass
        ...     def on_epoch_end(self): pass
        ...     def on_train_end(self): pass
        >>> isinstance(Counter(), TrainingProtocol)  # structural: no base class needed
        True
    """

    def on_train_begin(self) -> None:
        """Training starts (before the first epoch)."""
        return None

    def on_epoch_begin(self) -> None:
        """A training epoch starts."""
        return None

    def on_step_begin(self) -> None:
        """An optimizer step starts (before its first micro-batch)."""
        return None

    def on_step_end(self) -> None:
        """An optimizer step ended (after ``optimizer.step()``)."""
        return None

    def on_epoch_end(self) -> None:
        """A training epoch ended."""
        return None

    def on_train_end(self) -> None:
        """Training ended, normally or by an exception (exactly once). Restore anything you changed."""
        return None


class TrainingCallback(TrainingProtocol):
    """Base class with a no-op for every event (inherited from the protocol); override the ones you need.

    Besides the protocol's six events it has :meth:`on_evaluate` (a validation metric is known,
    as in Zeus's ``Callback``), which adapters call where the framework evaluates.

    Example:
        >>> from zeus_core import TrainingCallback
        >>> class Steps(TrainingCallback):
        ...     def __init__(self):
        ...         self.steps = 0
        ...     def on_step_end(self):
        ...         self.steps += 1
        >>> cb = Steps(); cb.on_train_begin(); cb.on_step_begin(); cb.on_step_end()
        >>> cb.steps
        1
    """

    def on_evaluate(self, metric: float) -> None:
        """A validation metric is known (after an epoch's evaluation); no-op by default."""
        return None


class CallbackList(TrainingCallback):
    """Fans every event out to several protocol objects, in order (reverse order for ``*_end``).

    ``on_train_end`` reaches every callback even if one of them raises; the first error is
    re-raised afterwards.

    Example:
        >>> from zeus_core import CallbackList, TrainingCallback
        >>> class Say(TrainingCallback):
        ...     def __init__(self, name):
        ...         self.name = name
        ...     def on_train_end(self):
        ...         print(self.name, "restored")
        >>> CallbackList([Say("first"), Say("second")]).on_train_end()
        second restored
        first restored
    """

    def __init__(self, callbacks: Iterable[TrainingProtocol]) -> None:
        self.callbacks = list(callbacks)

    def on_train_begin(self) -> None:
        """Call ``on_train_begin`` of every callback, in order."""
        for cb in self.callbacks:
            cb.on_train_begin()

    def on_epoch_begin(self) -> None:
        """Call ``on_epoch_begin`` of every callback, in order."""
        for cb in self.callbacks:
            cb.on_epoch_begin()

    def on_step_begin(self) -> None:
        """Call ``on_step_begin`` of every callback, in order."""
        for cb in self.callbacks:
            cb.on_step_begin()

    def on_step_end(self) -> None:
        """Call ``on_step_end`` of every callback, in reverse order."""
        for cb in reversed(self.callbacks):
            cb.on_step_end()

    def on_epoch_end(self) -> None:
        """Call ``on_epoch_end`` of every callback, in reverse order."""
        for cb in reversed(self.callbacks):
            cb.on_epoch_end()

    def on_evaluate(self, metric: float) -> None:
        """Call ``on_evaluate(metric)`` of every callback that has one, in order."""
        for cb in self.callbacks:
            on_evaluate = getattr(cb, "on_evaluate", None)
            if on_evaluate is not None:
                on_evaluate(metric)

    def on_train_end(self) -> None:
        """Call ``on_train_end`` of every callback, in reverse order, even if one raises.

        Raises:
            BaseException: The first error a callback raised, after every callback was called.
        """
        error: BaseException | None = None
        for cb in reversed(self.callbacks):
            try:
                cb.on_train_end()
            except BaseException as e:  # every callback must get the chance to restore its state
                error = error or e
        if error is not None:
            raise error
