"""Time, CPU time and peak memory of one operation, in the benchmark's own process.

Peak memory is the process's resident-set high-water mark *above its size when the operation
started*: on Linux the mark is reset before each operation (``/proc/self/clear_refs``), so each
operation gets its own peak. Elsewhere the whole-process ``ru_maxrss`` is all there is, and an
operation's peak shows only when it exceeds every earlier one.
"""

from __future__ import annotations

import re
import resource
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_STATUS = Path("/proc/self/status")
_CLEAR = Path("/proc/self/clear_refs")


def _status_kib(field: str) -> int | None:
    try:
        match = re.search(rf"^{field}:\s+(\d+)\s+kB", _STATUS.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(match.group(1)) if match else None


def _reset_peak() -> bool:
    try:
        _CLEAR.write_text("5")
    except OSError:
        return False
    return True


def _maxrss_kib() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak


@dataclass(frozen=True)
class Sample:
    seconds: float  # wall clock
    cpu_seconds: float  # all threads of the process (DuckDB's workers included)
    peak_mib: float  # resident-set high-water mark above the start, MiB

    @property
    def ms(self) -> float:
        return self.seconds * 1000


def measure(operation: Callable[[], Any]) -> tuple[Any, Sample]:
    """Run ``operation`` once; return its result and what it cost."""
    exact = _reset_peak()
    before = (_status_kib("VmRSS") if exact else None) or _maxrss_kib()
    wall, cpu = time.perf_counter(), time.process_time()
    result = operation()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = (_status_kib("VmHWM") if exact else None) or _maxrss_kib()
    return result, Sample(wall, cpu, max(peak - before, 0) / 1024)
