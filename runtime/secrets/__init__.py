"""Secrets a user types or a tool returns: found by one set of patterns, kept in a task's vault, shown as `[secret:N]`.

See docs/secrets.md for what is protected and what is not.
"""

from runtime.secrets.patterns import PATTERNS, SECRET_KINDS, SECRETS, Pattern, compiled
from runtime.secrets.seal import Seal
from runtime.secrets.vault import PLACEHOLDER, Secrets, UnknownSecret, Vault

__all__ = [
    "PATTERNS",
    "PLACEHOLDER",
    "SECRETS",
    "SECRET_KINDS",
    "Pattern",
    "Seal",
    "Secrets",
    "UnknownSecret",
    "Vault",
    "compiled",
]
