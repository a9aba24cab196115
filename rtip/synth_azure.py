"""Synthesized outputs of Azure resources for the offline engine (see rtip/synth.py)."""

from __future__ import annotations

from rtip.synth import Synthesizer

AZURE: dict[str, Synthesizer] = {}

__all__ = ["AZURE"]
