"""Evidence: what an error says, gathered from whatever chatcli is handed.

From an exception: its `status_code`, `status`, `code`, `type`, `body`, `message`, `response`
headers, class names, and the whole `__cause__` / `__context__` chain. From a string: its
text, and the JSON or Python-repr bodies embedded in it ("API Error: 400 {...}", "b'{...}'").
From a parsed JSON body: its code, status, message and header fields, at any depth. No SDK is
imported: attributes are read by name, and a property that raises reads as absent.

The work done for one error is bounded, whatever it is handed: the classifier must stay cheap
and total on adversarial input.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from http import HTTPStatus
from typing import Final

from chatcli.errors.exceptions import ChatcliError
from chatcli.errors.kinds import ErrorInfo
from chatcli.errors.numbers import NUMBER_KEYS

__all__ = ["Evidence", "gather"]


_CODE_KEYS: Final = frozenset(
    {"code", "type", "status", "error_code", "errortype", "name", "reason", "__type"}
)
_MESSAGE_KEYS: Final = frozenset({"message", "errormessage", "error", "detail", "msg", "details"})
_STATUS_KEYS: Final = frozenset({"status_code", "statuscode", "httpstatuscode", "http_status"})
_HEADER_KEYS: Final = frozenset({"headers", "httpheaders"})
_EXCEPTION_CODE_ATTRS: Final = ("status_code", "status", "code", "type", "error_code")
_EXCEPTION_VALUE_ATTRS: Final = ("body", "details", "response_json")
_EXCEPTION_TEXT_ATTRS: Final = ("message", "api_message")

# Identifier-like words in free text: snake_case / SCREAMING_CASE codes and exception names.
_IDENTIFIER: Final = re.compile(
    r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b|\b[A-Z][A-Za-z]*(?:Exception|Error)\b"
)
_REASON_PHRASES: Final = "|".join(
    re.escape(s.phrase) for s in HTTPStatus if 400 <= s.value <= 599 and s.phrase
)
_STATUS_IN_TEXT: Final = re.compile(
    r"(?:^\s*|\b(?:error|status|http|code)(?:\s+code)?['\"]?\s*[:=]?\s*)([45]\d\d)\b(?!\s*tokens)"
    rf"|\b([45]\d\d)\s+(?:{_REASON_PHRASES})\b",
    re.IGNORECASE,
)
_RETRY_IN_TEXT: Final = re.compile(
    r"\b(?:retry|try again)\s+(?:after|in)\s+(\d+(?:\.\d+)?)\s*"
    r"(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?)\b",
    re.IGNORECASE,
)
# Bounds on the work done for one error, whatever it is handed: error bodies are small, and
# the classifier must stay cheap and total on adversarial input.
_MAX_DEPTH: Final = 8
_MAX_ITEMS: Final = 2_000
_MAX_TEXT: Final = 100_000
_MAX_TEXTS: Final = 256
_MAX_PARSE_ATTEMPTS: Final = 16
_MAX_CHAIN: Final = 16


class Evidence:
    """What was found in an error: texts, codes, statuses, numbers. Built once, then read."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.messages: list[str] = []
        self.codes: list[str] = []  # every code-like word, for the rules
        self.fields: list[str] = []  # codes read from code/type/status fields, in order
        self.status: int | None = None
        self.numbers: dict[str, int] = {}
        self.retry_after: float | None = None
        self._items = 0

    @property
    def text(self) -> str:
        return "\n".join(self.texts)

    def add_text(self, text: str, depth: int = 0) -> None:
        text = text[:_MAX_TEXT]
        if len(self.texts) >= _MAX_TEXTS or not text.strip():
            return
        if any(text in seen for seen in self.texts):
            return
        self.texts.append(text)
        self.codes.extend(m.lower() for m in _IDENTIFIER.findall(text))
        for value in _embedded_values(text):
            self.add_value(value, depth + 1)

    def add_value(self, value: object, depth: int = 0) -> None:
        self._items += 1
        if depth > _MAX_DEPTH or self._items > _MAX_ITEMS:
            return
        if isinstance(value, str):
            self.add_text(value, depth)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                self._add_field(str(key).lower(), item, depth)
        elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
            for item in value:
                self.add_value(item, depth + 1)
        elif isinstance(value, bytes | bytearray):
            self.add_text(bytes(value).decode("utf-8", "replace"), depth)

    def _add_field(self, key: str, item: object, depth: int) -> None:
        if key in _CODE_KEYS or key in _STATUS_KEYS:
            self.add_code(item)
        if key in _MESSAGE_KEYS and isinstance(item, str) and item.strip():
            self.messages.append(item.strip())
        if key in NUMBER_KEYS and isinstance(item, int) and not isinstance(item, bool):
            self.numbers.setdefault(NUMBER_KEYS[key], item)
        if key in _HEADER_KEYS and isinstance(item, Mapping):
            self.add_headers(item)
        if key == "retrydelay" and isinstance(item, str):  # Gemini RetryInfo "39s"
            self._set_retry(_seconds(item.removesuffix("s"), "s"))
        self.add_value(item, depth + 1)

    def add_code(self, value: object) -> None:
        """A status/code/type field: an HTTP status when numeric, else a code word."""
        if isinstance(value, bool):
            return
        if isinstance(value, int) or (isinstance(value, str) and value.strip().isdecimal()):
            number = int(value)
            if 100 <= number <= 599 and self.status is None:
                self.status = number
        elif isinstance(value, str) and value.strip():
            self.fields.append(value.strip())
            self.codes.append(value.strip().lower())

    def add_headers(self, headers: object) -> None:
        for name, unit in (("retry-after-ms", "ms"), ("retry-after", "s")):
            raw = _header(headers, name)
            if raw is not None:
                self._set_retry(_seconds(raw, unit))

    def add_exception(self, exc: BaseException) -> None:
        self.codes.extend(cls.__name__.lower() for cls in type(exc).__mro__)
        for attr in _EXCEPTION_CODE_ATTRS:
            self.add_code(_attr(exc, attr))
        for attr in _EXCEPTION_VALUE_ATTRS:
            self.add_value(_attr(exc, attr))
        for attr in _EXCEPTION_TEXT_ATTRS:
            message = _attr(exc, attr)
            if isinstance(message, str):
                self.add_text(message)
        self.add_text(_safe_str(exc))
        self._add_response(_attr(exc, "response"))

    def _add_response(self, response: object) -> None:
        if isinstance(response, Mapping):  # botocore ClientError.response
            self.add_value(response)
            return
        if response is not None:
            self.add_code(_attr(response, "status_code"))
            self.add_headers(_attr(response, "headers"))

    def _set_retry(self, seconds: float | None) -> None:
        if seconds is not None and self.retry_after is None:
            self.retry_after = seconds


def _attr(obj: object, name: str) -> object:
    """getattr that survives properties which raise (an unread streaming response, ...)."""
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _safe_str(obj: object) -> str:
    try:
        return str(obj)
    except Exception:
        return ""


def _header(headers: object, name: str) -> str | None:
    get = _attr(headers, "get")
    if isinstance(headers, Mapping):
        for key, value in headers.items():
            if str(key).lower() == name:
                return str(value)
    elif callable(get):  # httpx-style case-insensitive Headers
        try:
            value = get(name)
        except Exception:
            return None
        return None if value is None else str(value)
    return None


_UNIT_SECONDS: Final = {
    "ms": 0.001,
    "millisecond": 0.001,
    "milliseconds": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
}


def _seconds(raw: str, unit: str) -> float | None:
    try:
        value = float(raw.strip()) * _UNIT_SECONDS[unit.lower()]
    except (ValueError, KeyError):
        return None  # e.g. an HTTP-date Retry-After: turning it into a delay needs a clock
    return value if 0 <= value < float("inf") else None


def _embedded_values(text: str) -> Iterator[object]:
    """JSON or Python-repr objects embedded in a message ("API Error: 400 {...}", "b'{...}'")."""
    pos, attempts = 0, 0
    while attempts < _MAX_PARSE_ATTEMPTS:
        start = min((i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0), default=-1)
        if start < 0:
            return
        attempts += 1
        value, end = _parse_at(text, start)
        if end > start:
            yield value
            pos = end
        else:
            pos = start + 1


def _parse_at(text: str, start: int) -> tuple[object, int]:
    """Parse a JSON value, else a Python literal (str() of a dict), at `start`; (None, -1)."""
    try:
        return json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError):
        pass
    end = _balanced_end(text, start)
    if end < 0:
        return None, -1
    try:
        return ast.literal_eval(text[start:end]), end
    # literal_eval can fail in many ways on arbitrary text (deep nesting included).
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None, -1


def _balanced_end(text: str, start: int) -> int:
    """Index just past the bracket that closes the one at `start`, skipping quoted strings."""
    depth, quote, escaped = 0, "", False
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "'\"":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
    return -1


def _exception_chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(current))
        yield current
        cause = current.__cause__
        if cause is None and not current.__suppress_context__:
            cause = current.__context__
        current = cause


def gather(error: object) -> tuple[Evidence, ErrorInfo | None]:
    """Evidence from an exception (whole chain), a string or a parsed body.

    Returns the info of a chatcli error found in the chain: it was classified already.
    """
    evidence = Evidence()
    if isinstance(error, BaseException):
        for exc in _exception_chain(error):
            info = _attr(exc, "info")
            if isinstance(exc, ChatcliError) and isinstance(info, ErrorInfo):
                return evidence, info
            evidence.add_exception(exc)
    else:
        evidence.add_value(error)
    if evidence.status is None:
        evidence.status = _status_in_text(evidence.text)
    if evidence.retry_after is None:
        evidence.retry_after = _retry_in_text(evidence.text)
    return evidence, None


def _status_in_text(text: str) -> int | None:
    match = _STATUS_IN_TEXT.search(text)
    return None if match is None else int(match[1] or match[2])


def _retry_in_text(text: str) -> float | None:
    match = _RETRY_IN_TEXT.search(text)
    return None if match is None else _seconds(match[1], match[2].lower())
