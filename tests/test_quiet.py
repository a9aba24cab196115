"""Solver noise never reaches standard output (where `rtip plan --json` prints its document)."""

from __future__ import annotations

import ctypes
import os

from serving._quiet import quiet_stdout


def test_c_level_prints_inside_the_block_are_dropped_and_outside_kept(capfd) -> None:
    libc = ctypes.CDLL(None)
    with quiet_stdout():
        libc.printf(b"HighsMipSolverData noise\n")
        os.write(1, b"raw noise\n")
    libc.printf(b"kept\n")
    libc.fflush(None)
    out = capfd.readouterr().out
    assert "noise" not in out
    assert "kept" in out
