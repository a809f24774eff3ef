"""Optimizers: GPU power limit, batch size, and Perseus pipeline frequencies."""
