"""What a deploy-time check reports: one finding per resource and reason."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    ERROR = "error"  # `pulumi up` would fail or misbehave
    WARNING = "warning"  # the check could not decide; a person should look
    INFO = "info"  # not checked, and why


@dataclass(frozen=True)
class Finding:
    check: str  # "kinds" or "values"
    urn: str
    message: str
    severity: Severity = Severity.ERROR

    def __str__(self) -> str:
        return f"{self.severity} [{self.check}] {self.message}"


__all__ = ["Finding", "Severity"]
