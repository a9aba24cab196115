"""Customer-managed KMS keys: one rule for every AWS key the stack owns."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

# The longest window KMS allows: a key scheduled for deletion by mistake can be recovered for 30 days.
DELETION_WINDOW_DAYS = 30


def customer_key(name: str, purpose: str, opts: pulumi.ResourceOptions,
                 alias: str | None = None) -> aws.kms.Key:
    """A symmetric key with yearly automatic rotation; `alias` names it for people."""
    key = aws.kms.Key(name, aws.kms.KeyArgs(description=purpose, enable_key_rotation=True,
                                            deletion_window_in_days=DELETION_WINDOW_DAYS), opts=opts)
    if alias:
        aws.kms.Alias(name, aws.kms.AliasArgs(name=alias, target_key_id=key.key_id), opts=opts)
    return key


__all__ = ["DELETION_WINDOW_DAYS", "customer_key"]
