"""Redaction before a memory is recorded: each kind of secret and personal data, labels kept, ordinary
text (dates, the last digits of a card, words after "token") left alone, and patterns a caller adds."""

from __future__ import annotations

import re

import pytest

from runtime.memory import Pattern, redact


@pytest.mark.parametrize(("text", "redacted", "kind"), [
    ("my key is sk-live-4f9a8b7c6d5e4f3a2b1c", "my key is [redacted:api_key]", "api_key"),
    ("uses sk-proj-Abc123Def456Ghi789", "uses [redacted:api_key]", "api_key"),
    ("pushed with ghp_abcdefghijklmnopqrstuvwxyz0123", "pushed with [redacted:api_key]", "api_key"),
    ("aws AKIAABCDEFGHIJKLMNOP here", "aws [redacted:api_key] here", "api_key"),
    ("password: hunter2!", "password: [redacted:password]", "password"),
    ("PASSWORD=s3cr3t;next", "PASSWORD=[redacted:password];next", "password"),
    ('passphrase is "correct horse battery"', "passphrase is [redacted:password]", "password"),
    ("token=4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", "token=[redacted:secret]", "secret"),
    ("the secret is Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==", "the secret is [redacted:secret]", "secret"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY----- kept",
     "[redacted:private_key] kept", "private_key"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", "[redacted:private_key]", "private_key"),
    ("write to alice.smith+support@example.co.uk", "write to [redacted:email]", "email"),
    ("call +31 6 1234 5678 after five", "call [redacted:phone] after five", "phone"),
    ("mobile 06-12345678", "mobile [redacted:phone]", "phone"),
    ("US (555) 123-4567", "US [redacted:phone]", "phone"),
])
def test_each_kind_is_replaced_by_its_placeholder_and_named(text: str, redacted: str, kind: str) -> None:
    assert redact(text) == (redacted, (kind,))


@pytest.mark.parametrize("text", [
    "Key created 3 days ago",
    "Card ends 4242",
    "Renewed on 2026-10-02 10:30, plan Pro",
    "token authentication is broken since version 1.2.3",
    "Prefers short answers; account A-123",
])
def test_ordinary_text_is_left_as_it_is(text: str) -> None:
    assert redact(text) == (text, ())


def test_several_kinds_in_one_text_are_each_named_once_in_the_order_found() -> None:
    out = redact("sk-live-aaaaaaaaaaaa and sk-live-bbbbbbbbbbbb, password=x1, bob@example.com")
    assert out.text == "[redacted:api_key] and [redacted:api_key], password=[redacted:password], [redacted:email]"
    assert out.kinds == ("password", "api_key", "email")


def test_a_caller_adds_patterns_as_regexes_or_named_kinds() -> None:
    out = redact("ticket T-99 for customer C-1234", extra=[r"T-\d+", Pattern("customer", re.compile(r"C-\d+"))])
    assert out == ("ticket [redacted:custom] for customer [redacted:customer]", ("custom", "customer"))
