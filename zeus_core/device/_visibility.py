"""Which GPUs the user made visible: ``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES``.

:func:`parse_visible_devices` maps such a list to the vendor library's indices the way the CUDA
runtime does, so GPU ``0`` in Zeus Suite is ``cuda:0`` in PyTorch. Every GPU backend uses it.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from zeus_core.exceptions import ZeusConfigError, ZeusDeviceNotFoundError

__all__ = ["VISIBILITY_VARIABLES", "parse_visible_devices", "visible_device_variables"]

VISIBILITY_VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
"""The environment variables that decide which GPUs a process sees, and in which order."""


def parse_visible_devices(
    spec: str, count: int, uuids: Callable[[], Sequence[str]], variable: str = "CUDA_VISIBLE_DEVICES"
) -> list[int]:
    """Map a ``CUDA_VISIBLE_DEVICES``-style list to the vendor library's device indices.

    Entries are integer indices or ``GPU-<uuid>`` prefixes (matched like the CUDA runtime does:
    any unique prefix of the UUID). As in CUDA, a negative index ends the list, so ``-1`` hides
    every GPU. An empty string hides every GPU.

    Args:
        spec: The variable's value, e.g. ``"2,0"`` or ``"GPU-5f0b,1"``.
        count: How many devices the vendor library sees.
        uuids: Returns every device's UUID, in library order (called only for UUID entries).
        variable: The variable's name, for messages.

    Returns:
        Library indices in the order the user sees them (position ``i`` is ``cuda:i``).

    Raises:
        ZeusConfigError: A ``MIG-`` entry (NVML cannot meter MIG slices), a duplicate, an
            ambiguous UUID prefix, or an entry that is neither an index nor a UUID.
        ZeusDeviceNotFoundError: An index or UUID this machine does not have.
    """
    indices: list[int] = []
    all_uuids: Sequence[str] | None = None
    for raw in spec.split(","):
        entry = raw.strip()
        if not entry:
            if spec.strip():
                raise ZeusConfigError(
                    f"{variable}={spec!r} has an empty entry. Write a comma-separated list such as '0,1'."
                )
            continue
        if entry.upper().startswith("MIG-"):
            raise ZeusConfigError(
                f"{variable}={spec!r} names the MIG slice {entry!r}: NVML cannot meter the power or energy "
                "of MIG slices. Measure the whole GPU instead: unset the MIG entry and use the parent "
                f"GPU's index or GPU-<uuid> in {variable} (`nvidia-smi -L` lists both)."
            )
        if entry.upper().startswith("GPU-"):
            if all_uuids is None:
                all_uuids = list(uuids())
            prefix = entry.lower()
            matches = [i for i, u in enumerate(all_uuids) if u.lower().startswith(prefix)]
            if not matches:
                raise ZeusDeviceNotFoundError(
                    f"{variable}={spec!r}: no GPU has a UUID starting with {entry!r}. This machine's GPUs "
                    f"are {list(all_uuids)}; fix the entry (`nvidia-smi -L` lists the UUIDs)."
                )
            if len(matches) > 1:
                raise ZeusConfigError(
                    f"{variable}={spec!r}: the UUID prefix {entry!r} matches GPUs {matches}. Give more "
                    "characters of the UUID."
                )
            index = matches[0]
        else:
            try:
                index = int(entry)
            except ValueError:
                raise ZeusConfigError(
                    f"{variable}={spec!r}: entry {entry!r} is neither a GPU index nor a GPU-<uuid>. "
                    "Use a comma-separated list such as '0,1' or 'GPU-5f0b…'."
                ) from None
            if index < 0:
                break  # CUDA stops at the first negative index ("-1" hides every GPU)
            if index >= count:
                raise ZeusDeviceNotFoundError(
                    f"{variable}={spec!r}: there is no GPU {index}; this machine has {count} GPU(s) "
                    f"(indices 0-{count - 1}). Fix or unset {variable}."
                    if count
                    else f"{variable}={spec!r}: there is no GPU {index}; this machine has no GPUs."
                )
        if index in indices:
            raise ZeusConfigError(f"{variable}={spec!r} lists GPU {entry!r} twice. List each GPU once.")
        indices.append(index)
    return indices


def visible_device_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The device-visibility variables set in ``environ``, name -> value."""
    return {n: environ[n] for n in VISIBILITY_VARIABLES if n in environ}
