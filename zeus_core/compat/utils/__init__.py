"""Zeus's ``zeus.utils`` modules: ``env``, ``lr_scaler``, ``framework``, ``zeusd``, ``lat_lon``.

Example:
    >>> from zeus_core.compat.utils.lr_scaler import LinearScaler
    >>> LinearScaler(bs=64, lr=0.01).compute_lr(128)
    0.02
"""
