"""The machine a simulated dataset was computed on, as far as bit-exact physics depends on it.

MuJoCo's results differ in the last bits between CPUs of one machine kind: with the same MuJoCo wheel,
model, libraries and renderer, an AMD EPYC with AVX-512 computes other arm states (obs streams, sidecar
states) than the machine this project's first golden hashes were recorded on, while every command,
image and label is equal. A replay is bit for bit on the CPU that generated the data; elsewhere it may
drift, and the replay's report names the CPU that differs (``simulation.cpu``).
"""

from __future__ import annotations

import platform
from pathlib import Path

#: SIMD extensions whose presence changes floating-point code paths (libm, compiled kernels)
SIMD_FLAGS = ("fma", "avx2", "avx512f")


def cpu_identity() -> str:
    """``"<vendor> <model name> (<SIMD extensions>)"`` from /proc/cpuinfo's first processor (e.g.
    ``"AuthenticAMD AMD EPYC (fma avx2 avx512f)"``); the processor name Python reports elsewhere."""
    vendor, model, flags = "", "", set()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor is enough
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "vendor_id":
            vendor = value
        elif key in ("model name", "Processor") and not model:
            model = value
        elif key in ("flags", "Features"):
            flags = set(value.split())
    return f"{vendor} {model} ({' '.join(f for f in SIMD_FLAGS if f in flags)})".strip()
