"""CPU feature detection: does this CPU have bfloat16 matrix units (so that a bf16 ELMo is faster)?

On CPUs with AMX or AVX512-BF16, oneDNN runs bfloat16 matmuls about twice as fast as float32 or better; on
AVX2-only CPUs bfloat16 is emulated and several times *slower*. ``auto_dtype`` picks accordingly and logs
its choice in one line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)

#: CPU flags (as /proc/cpuinfo spells them) that mean bfloat16 matmuls run on matrix/dot-product units
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The flags of the first CPU in ``path`` (empty where it cannot be read, e.g. not Linux).

    Args:
        path: a file in the format of ``/proc/cpuinfo``.

    Returns:
        A frozenset of flag names.
    """
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def bf16_units(flags: Iterable[str] | None = None) -> list[str]:
    """Which of :data:`BF16_FLAGS` the CPU (or the given ``flags``) has.

    Args:
        flags: CPU flags, or ``None`` for this machine's (:func:`cpu_flags`).

    Returns:
        The list of those flags present.
    """
    flags = cpu_flags() if flags is None else frozenset(flags)
    return [flag for flag in BF16_FLAGS if flag in flags]


def auto_choice(flags: Iterable[str] | None = None) -> tuple[str, str]:
    """("bfloat16" where the CPU has bf16 matrix units, else "float32"; a one-line reason).

    Args:
        flags: CPU flags, or ``None`` for this machine's.

    Returns:
        ``(dtype, reason)``.

    Example:

    >>> from elmo_keras.utils.cpu import auto_choice
    >>> auto_choice(["avx2"])[0], auto_choice(["amx_bf16"])[0]
    ('float32', 'bfloat16')
    """
    units = bf16_units(flags)
    if units:
        return "bfloat16", f"dtype 'auto' -> bfloat16 (the CPU has {', '.join(units)})"
    return "float32", f"dtype 'auto' -> float32 (the CPU has no bf16 matrix units: none of {', '.join(BF16_FLAGS)})"


def auto_dtype(flags: Iterable[str] | None = None) -> str:
    """The dtype of :func:`auto_choice`, its reason logged (INFO) in one line.

    Args:
        flags: CPU flags, or ``None`` for this machine's.

    Returns:
        ``"bfloat16"`` or ``"float32"``.
    """
    dtype, reason = auto_choice(flags)
    log.info("elmo_keras: %s", reason)
    return dtype
