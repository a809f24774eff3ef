"""Framework adapters: each imports its framework only when used."""
