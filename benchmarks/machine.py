"""What every results file records about the run: CPU (model and the flags that matter here), versions, date."""

from __future__ import annotations

import os
import platform
import time

#: CPU flags that decide which kernels TensorFlow can use (bf16 needs avx512_bf16 or amx_bf16 to be fast)
FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def cpu() -> dict:
    """Model name and the relevant flags from /proc/cpuinfo (empty where it cannot be read)."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    name = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    return {"cpu": name, "flags": [flag for flag in FLAGS if flag in flags]}


def machine_info() -> dict:
    import keras
    import numpy as np
    import tensorflow as tf

    return {
        **cpu(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "numpy": np.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
