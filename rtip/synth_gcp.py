"""Synthesized outputs of Google Cloud resources for the offline engine (see rtip/synth.py)."""

from __future__ import annotations

from rtip.synth import Synthesizer

GCP: dict[str, Synthesizer] = {}

__all__ = ["GCP"]
