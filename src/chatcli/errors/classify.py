"""`classify_error`: any provider failure (an exception, a message, a parsed body) into one
`ErrorInfo`. Every failure is classified once, at the adapter boundary (or by `Client` for a
foreign exception); the core only ever looks at the result.

How it decides:

1. Evidence is gathered from what it is given (`evidence`).
2. The rule table (`rules`) is tried top to bottom; the first rule that matches decides.
3. If no rule matches, the HTTP status is used as a hint.

Numbers the message states are read (`numbers`) only for `CONTEXT_OVERFLOW` and `OUTPUT_CAP`,
where recovery uses them. The message kept is cleared of credentials (`redact_secrets`): a
provider or a proxy may echo a key in an error, and it must never reach what chatcli shows,
logs or stores.
"""

from __future__ import annotations

import re
from typing import Final

from chatcli.errors.evidence import Evidence, gather
from chatcli.errors.kinds import ErrorInfo, ErrorKind
from chatcli.errors.numbers import numbers_in
from chatcli.errors.rules import RULES, Rule, status_hint

__all__ = ["classify_error", "redact_secrets"]


# The kinds whose numbers recovery uses, and that a 429 can never be.
_TOKEN_KINDS: Final = frozenset({ErrorKind.CONTEXT_OVERFLOW, ErrorKind.OUTPUT_CAP})


def _first_rule(evidence: Evidence) -> tuple[Rule, str] | None:
    """The first rule of the table that matches, with the code or text it matched."""
    text = evidence.text
    for rule in RULES:
        if rule.source == "code":
            hit = next((c for c in evidence.codes if rule.pattern.fullmatch(c)), None)
        else:
            found = rule.pattern.search(text)
            hit = None if found is None else found[0]
        if hit is not None:
            return rule, hit
    return None


def _decide(evidence: Evidence, status: int | None) -> tuple[ErrorKind, str | None, str | None]:
    """(kind, reason, code) for the evidence; the HTTP status is only a fallback hint."""
    found = _first_rule(evidence)
    if found is None:
        kind = status_hint(status)
        return kind, (None if kind is ErrorKind.OTHER else f"http:{status}"), None
    rule, hit = found
    if status == 429 and rule.source == "text" and rule.kind in _TOKEN_KINDS:
        # A 429 is a throttle whatever its wording ("... reduce the prompt length").
        return ErrorKind.RATE_LIMIT, "http:429", None
    if status in (401, 403) and rule.kind is ErrorKind.INVALID_REQUEST:
        # A generic "invalid request" type says less than the status that refused the caller.
        return ErrorKind.AUTH, f"http:{status}", (hit if rule.source == "code" else None)
    return rule.kind, rule.name, (hit if rule.source == "code" else None)


# Credentials a provider or a proxy may echo in an error (an "Invalid key: Bearer sk-..." body,
# a URL with ?key=): they never reach a message chatcli shows, logs or stores.
_SECRETS = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 ***"),
    (
        re.compile(
            r"(?i)\b(api[-_ ]?key|x-api-key|x-goog-api-key|access[-_ ]?token|authorization)"
            r"([\"']?\s*[:=]\s*[\"']?)[^\s\"',;&}]{6,}"
        ),
        r"\1\2***",
    ),
    (re.compile(r"([?&](?:key|api_key|access_token)=)[^&\s\"']+"), r"\1***"),
    (re.compile(r"\b(sk-(?:ant-|proj-)?)[A-Za-z0-9_-]{6,}"), r"\1***"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"), "AIza***"),
)


def redact_secrets(text: str) -> str:
    """`text` with API keys, bearer tokens and key query parameters replaced by ***."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def classify_error(error: object, *, status: int | None = None) -> ErrorInfo:
    """Classify an exception, a message string or a parsed JSON body into an `ErrorInfo`.

    `status` is the HTTP status when the caller knows it (it wins over one found in the
    error). Never raises: anything unrecognised is `ErrorKind.OTHER` (or what the status
    suggests). A chatcli error that carries an `ErrorInfo` returns it unchanged.
    """
    evidence, known = gather(error)
    if known is not None:
        return known
    status = status if status is not None else evidence.status
    kind, reason, code = _decide(evidence, status)
    numbers: dict[str, int] = {}
    if kind in _TOKEN_KINDS:
        numbers = {**numbers_in(evidence.text), **evidence.numbers}
    return ErrorInfo(
        kind=kind,
        message=redact_secrets(
            evidence.messages[0] if evidence.messages else evidence.text.strip()
        ),
        status=status,
        code=code or next(iter(evidence.fields), None),
        retry_after=evidence.retry_after,
        reason=reason,
        prompt_tokens=numbers.get("prompt_tokens"),
        limit=numbers.get("limit"),
        max_tokens=numbers.get("max_tokens"),
        output_limit=numbers.get("output_limit"),
        requested_tokens=numbers.get("requested_tokens"),
        input_chars=numbers.get("input_chars"),
        limit_chars=numbers.get("limit_chars"),
    )
