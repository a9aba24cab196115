"""What the Pulumi runtime knows of a config value the stack names as a secret (stacks.secrets):
under the CLI, the stack's values and `PULUMI_CONFIG_SECRET_KEYS`; offline, the stack file's
values and `secure:` keys, which rtip/offline.py hands the SDK the same way."""

from __future__ import annotations

import pulumi

from stacks.secrets import SecretState


def secret_state(key: str) -> SecretState:
    """Whether the stack sets config `key` (`rtip:<name>`), and as a secret."""
    if pulumi.runtime.get_config(key) is None:
        return SecretState.MISSING
    return SecretState.SECRET if pulumi.runtime.is_config_secret(key) else SecretState.PLAIN


__all__ = ["secret_state"]
