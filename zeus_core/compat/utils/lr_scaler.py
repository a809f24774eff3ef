"""Zeus's ``zeus.utils.lr_scaler``: the suite's :class:`LinearScaler` and :class:`SquareRootScaler`.

Example:
    >>> from zeus_core.compat.utils.lr_scaler import SquareRootScaler
    >>> SquareRootScaler(bs=32, lr=1e-3).compute_lr(new_bs=128)
    0.002
"""

from zeus_core.optimizer.batch_size._lr_scaling import LinearScaler, SquareRootScaler

__all__ = ["LinearScaler", "SquareRootScaler"]
