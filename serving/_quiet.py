"""Silence stray C-level prints on standard output while a solver runs.

HiGHS (through scipy.optimize.milp) prints a debug line from its MIP solver
("HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();") straight to file
descriptor 1, whatever `disp` says; `rtip plan --json` must print nothing but its document there.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

_LIBC = ctypes.CDLL(None)


@contextmanager
def quiet_stdout() -> Iterator[None]:
    """Point fd 1 at /dev/null for the block; C buffers are flushed before it is restored."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        _LIBC.fflush(None)
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


__all__ = ["quiet_stdout"]
