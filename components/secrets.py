"""What the Pulumi runtime knows of a config value the stack names as a secret (stacks.secrets):
under the CLI, the stack's values and `PULUMI_CONFIG_SECRET_KEYS`; offline, the stack file's
values and `secure:` keys, which rtip/offline.py hands the SDK the same way.

The CLI decrypts the stack's config before it starts the program, so there a secret's value is
its clear text; offline it is a placeholder (stacks.secrets.offline_placeholder): the stack
file holds only ciphertext."""

from __future__ import annotations

import pulumi

from stacks.secrets import SecretState, offline_placeholder


def secret_state(key: str) -> SecretState:
    """Whether the stack sets config `key` (`rtip:<name>`), and as a secret."""
    if pulumi.runtime.get_config(key) is None:
        return SecretState.MISSING
    return SecretState.SECRET if pulumi.runtime.is_config_secret(key) else SecretState.PLAIN


def secret_value(key: str) -> str | None:
    """Config `key`'s clear value where the runtime holds it; None where it holds only ciphertext
    (offline) or nothing."""
    value = pulumi.runtime.get_config(key)
    return None if value is None or value == offline_placeholder(key) else value


__all__ = ["secret_state", "secret_value"]
