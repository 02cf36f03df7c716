"""Responses compaction for any upstream: `POST /v1/responses/compact`, the inline
`{"type": "compaction_trigger"}` input item and `context_management` on `POST /v1/responses`.

OpenAI answers these with an opaque, encrypted `compaction` item that the client keeps and
sends back; only OpenAI can read it. In front of another upstream the proxy does the same
with chatcli's own compaction (`Client.acompact`, a verified summary written by the upstream)
and answers with a well-formed `compaction` item whose `encrypted_content` is chatcli's own
sealed token (`Sealer`): `chatcli.c2.`, the id of the key that sealed it, `.`, and a Fernet
token (`cryptography`'s: AES-128-CBC encrypted, HMAC-SHA256 authenticated, stamped with the
time it was made) of the JSON of what the compaction left (the summary, and the input items of
the turns it kept verbatim). The token is self-contained, so any replica holding the key opens
it; where the keys come from, and how they rotate, is `chatcli.proxy.keys`. A token is
accepted for the keyring's `ttl` after it was made; one sealed with a key the proxy does not
hold, altered, or expired is the client's 400 saying which, never a crash.

What the item stands for is OpenAI's rule: the latest compaction carries everything before
it. When a request carries one of the proxy's, `expanded` replaces it, before the request is
read, with the summary (a user message, as chatcli's own compaction renders it) and the kept
items; the system and developer messages before it are kept, the other items before it are
dropped (the client may keep them or not: the answer is the same). A `compaction` item the
proxy did not make is OpenAI's: no other upstream can read it, and it is refused with a 400.
In front of OpenAI with a model that compacts on its servers the proxy passes compaction to
OpenAI instead (`chatcli.proxy.compaction_routes`), and such an item goes to it unchanged
(`openai_compaction`).

The shapes follow openai-python's types: `ResponseCompactionItem` (`id`, `encrypted_content`,
`type`, `created_by`), `CompactedResponse` (`object: "response.compaction"`, `output`: the
user messages then exactly one compaction item, `usage`), the `CompactionTrigger` input item
("must be the final input item") and `context_management: [{"type": "compaction",
"compact_threshold": N}]`.

Anthropic's `compaction` block (in an assistant turn; the API ignores everything before it)
shows its summary as plain text: in front of an upstream of another dialect, `expanded_blocks`
replaces it with that summary the same way, and the `compact_20260112` edit of
`context_management` (`compact_edit`) is served with chatcli's compaction, its answer beginning
with a `compaction` block (`compaction_block`: the summary, then the turns kept, as text).
"""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from chatcli.compaction import SUMMARY_HEADER, CompactionResult, is_summary_message
from chatcli.messages import Message
from chatcli.wire.dialect import ClientRequest, RequestError

__all__ = [
    "TOKEN_PREFIX",
    "OpenAICompaction",
    "Sealed",
    "Sealer",
    "SealingKey",
    "compact_edit",
    "compact_threshold",
    "compaction_block",
    "compaction_item",
    "concerns",
    "expanded",
    "expanded_blocks",
    "openai_compaction",
    "sealed_of",
    "sealing_kid",
    "told",
    "triggered",
    "user_messages",
]

Json = dict[str, Any]

logger = logging.getLogger("chatcli.proxy")

COMPACT_EDIT = "compact_20260112"  # Anthropic's compaction edit
_ANY_FORMAT = "chatcli."  # every token chatcli made, of any format
TOKEN_PREFIX = "chatcli.c2."  # this format: a token of another is not opened
_SYSTEM_ROLES = frozenset({"system", "developer"})
# Seconds a token may be dated after its key stopped sealing: replicas' clocks differ a little.
_CLOCK_SKEW_S = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Sealed:
    """What a compaction left: the summary (empty: nothing was summarised) and the input items
    of the turns it kept verbatim, which follow the summary."""

    summary: str
    kept: tuple[Json, ...] = ()

    def items(self) -> list[Json]:
        """The input items that the compaction item stands for."""
        summary = [{"role": "user", "content": self.summary}] if self.summary else []
        return [*summary, *self.kept]


@dataclass(frozen=True, slots=True, kw_only=True)
class SealingKey:
    """A key of a proxy's keyring: `kid` names it in the tokens it seals, `secret` (32 random or
    derived bytes) is the Fernet key; `sealed_until`: when it stopped sealing (None: it may
    still), so a token dated later was not made with it."""

    kid: str
    secret: bytes
    sealed_until: float | None = None

    def __repr__(self) -> str:  # never the secret
        return f"SealingKey(kid={self.kid!r}, sealed_until={self.sealed_until!r})"


class Sealer:
    """Seals compaction tokens with the first of `keys` and opens those any of them sealed, up
    to `ttl` seconds after they were made (module docstring); `clock`: epoch seconds."""

    def __init__(
        self,
        keys: Sequence[SealingKey],
        *,
        ttl: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not keys:
            raise ValueError("a Sealer needs a key")
        self.ttl = ttl
        self.kids = tuple(key.kid for key in keys)
        self._sealing = keys[0]
        self._keys = {key.kid: key for key in keys}
        self._clock = clock

    def seal(self, sealed: Sealed) -> str:
        payload = json.dumps(
            {"summary": sealed.summary, "kept": list(sealed.kept)},
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
        token = _fernet(self._sealing).encrypt_at_time(payload, int(self._clock()))
        return f"{TOKEN_PREFIX}{self._sealing.kid}.{token.decode()}"

    def open(self, token: str, *, param: str = "input") -> Sealed:
        """The content of `token`; one that is not of this keyring, or no longer, is a
        RequestError (400) that says why: wrong key, altered or expired."""
        data = self._opened(token, param)
        kept = data.get("kept")
        return Sealed(
            summary=str(data.get("summary") or ""),
            kept=tuple(i for i in kept if isinstance(i, dict)) if isinstance(kept, list) else (),
        )

    def _opened(self, token: str, param: str) -> dict[str, Any]:
        if not token.startswith(TOKEN_PREFIX):
            raise _refused(
                "wrong format: it was made by an earlier chatcli proxy, whose items this one no "
                "longer opens",
                param,
            )
        kid, _, body = token[len(TOKEN_PREFIX) :].partition(".")
        key = self._keys.get(kid)
        if key is None:
            raise _refused(
                f"wrong key: it was sealed with a key this proxy does not hold (key id "
                f"{kid[:40]!r}): another proxy's, or a key removed since",
                param,
            )
        fernet = _fernet(key)
        try:
            made = fernet.extract_timestamp(body.encode())
            data = json.loads(fernet.decrypt(body.encode()))
        except (InvalidToken, ValueError):
            data, made = None, 0
        if not isinstance(data, dict):
            raise _refused("altered: its encrypted_content fails authentication", param)
        until = key.sealed_until
        if until is not None and made > until + _CLOCK_SKEW_S:
            raise _refused("altered: it is dated after its key stopped sealing", param)
        age = self._clock() - made
        if age > self.ttl:
            raise _refused(
                f"expired: it was made {age / 86400:.1f} days ago, and items are opened for "
                f"{self.ttl / 86400:g} days (--compaction-ttl)",
                param,
            )
        return data


def _fernet(key: SealingKey) -> Fernet:
    return Fernet(base64.urlsafe_b64encode(key.secret))


def _refused(cause: str, param: str) -> RequestError:
    return RequestError(f"compaction item refused, {cause}; compact again", param=param)


def sealing_kid(body: Mapping[str, Any]) -> str | None:
    """The key id of the token in `body`'s latest compaction item, when chatcli made it in
    this format (None: it has none, or another's)."""
    items = body.get("input")
    latest = _latest_compaction(items)
    item = items[latest] if latest is not None and isinstance(items, list) else {}
    token = item.get("encrypted_content")
    if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
        return None
    return token[len(TOKEN_PREFIX) :].partition(".")[0]


def compaction_item(token: str) -> Json:
    """A `compaction` output item carrying `token`."""
    return {
        "type": "compaction",
        "id": f"cmp_{uuid.uuid4().hex}",
        "encrypted_content": token,
        "created_by": "chatcli",
    }


def concerns(body: Mapping[str, Any]) -> bool:
    """Whether a Responses `body` has anything of this module's: a compaction or trigger item,
    or `context_management`."""
    items = body.get("input")
    kinds = {_type(item) for item in items} if isinstance(items, list) else set()
    return "context_management" in body or bool(kinds & {"compaction", "compaction_trigger"})


def triggered(body: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """`body` without its `compaction_trigger` item, and whether it had one (the final input
    item, as the API requires: one elsewhere is a 400)."""
    items = body.get("input")
    if not isinstance(items, list):
        return dict(body), False
    at = [i for i, item in enumerate(items) if _type(item) == "compaction_trigger"]
    if not at:
        return dict(body), False
    if at != [len(items) - 1]:
        raise RequestError("a compaction_trigger item must be the final input item", param="input")
    rest = items[:-1]
    if not rest:
        raise RequestError("a compaction_trigger needs a conversation before it", param="input")
    return {**body, "input": rest}, True


def compact_threshold(body: Mapping[str, Any]) -> int | None:
    """The `compact_threshold` of `context_management` (None: no compaction asked)."""
    entries = body.get("context_management")
    if entries is None:
        return None
    if not isinstance(entries, list):
        raise RequestError("context_management must be a list", param="context_management")
    for entry in entries:
        if isinstance(entry, dict) and entry.get("type") == "compaction":
            value = entry.get("compact_threshold")
            if value is None:
                return 0  # no threshold given: the server's own choice; chatcli's is "now"
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise RequestError(
                    "compact_threshold must be a non-negative integer",
                    param="context_management",
                )
            return value
    return None


def expanded(body: Mapping[str, Any], sealer: Sealer) -> dict[str, Any]:
    """`body` with its latest compaction item replaced by what it stands for (module
    docstring); `body` itself when its input has none."""
    items = body.get("input")
    latest = _latest_compaction(items)
    if latest is None:
        return dict(body)
    assert isinstance(items, list)  # it has a compaction item
    token = items[latest].get("encrypted_content")
    param = f"input[{latest}].encrypted_content"
    if not isinstance(token, str) or not token.startswith(_ANY_FORMAT):
        raise RequestError(
            "this compaction item was not made by chatcli (only OpenAI can read OpenAI's), "
            "and this upstream is not OpenAI",
            param=param,
        )
    sealed = sealer.open(token, param=param)
    logger.info("chatcli proxy: expanded a compaction item (%s)", told(sealed))
    systems = [item for item in items[:latest] if _is_system(item)]
    return {**body, "input": [*systems, *sealed.items(), *items[latest + 1 :]]}


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenAICompaction:
    """A Responses body for OpenAI itself, its latest compaction item (one OpenAI made) taken
    out: `body` keeps the system and developer messages before it (OpenAI's rule: the item
    carries the rest) and every item after it; `item` goes back, unchanged, at `place` of
    `body`'s input."""

    body: dict[str, Any]
    item: Json
    place: int


def openai_compaction(body: Mapping[str, Any]) -> OpenAICompaction | None:
    """`body`'s latest compaction item, when OpenAI made it (not a chatcli token), taken out
    (`OpenAICompaction`); None: it has none, or chatcli's."""
    items = body.get("input")
    latest = _latest_compaction(items)
    if latest is None:
        return None
    assert isinstance(items, list)  # it has a compaction item
    token = items[latest].get("encrypted_content")
    if isinstance(token, str) and token.startswith(_ANY_FORMAT):
        return None
    systems = [i for i in items[:latest] if _is_system(i)]
    kept = {**body, "input": [*systems, *items[latest + 1 :]]}
    return OpenAICompaction(body=kept, item=items[latest], place=len(systems))


def _latest_compaction(items: Any) -> int | None:
    """The place of the latest compaction item of `items` (None: it has none)."""
    if not isinstance(items, list):
        return None
    return max((i for i, item in enumerate(items) if _type(item) == "compaction"), default=None)


def expanded_blocks(body: Mapping[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages `body` for an upstream of another dialect, its latest
    `compaction` block replaced by its summary: the turns before the block's are dropped (the
    API ignores everything before it) and the summary, which Anthropic's block shows as text,
    becomes a user message as chatcli's own compaction renders one; the rest of the block's
    turn, and the turns after it, are kept."""
    turns = body.get("messages")
    if not isinstance(turns, list):
        return dict(body)
    at = [
        i
        for i, turn in enumerate(turns)
        if isinstance(turn, dict)
        and turn.get("role") == "assistant"
        and any(_summary_of(block) is not None for block in _blocks(turn))
    ]
    if not at:
        return dict(body)
    latest = turns[at[-1]]
    blocks = _blocks(latest)
    summary = [s for s in map(_summary_of, blocks) if s is not None][-1]
    rest = blocks[_last_compaction(blocks) + 1 :]
    logger.info("chatcli proxy: expanded a compaction block (a summary of %d chars)", len(summary))
    text = f"{SUMMARY_HEADER}: the conversation before this was replaced by this summary.]"
    replaced: list[Any] = [{"role": "user", "content": f"{text}\n\n{summary}"}]
    if rest:
        replaced.append({**latest, "content": rest})
    return {**body, "messages": [*replaced, *turns[at[-1] + 1 :]]}


def compact_edit(body: Mapping[str, Any]) -> tuple[dict[str, Any], bool, int | None]:
    """An Anthropic Messages `body` without its `compact_20260112` edit, whether it had one,
    and the edit's trigger in input tokens (None: it names none; chatcli's own point then)."""
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, dict) else None
    if not isinstance(edits, list):
        return dict(body), False, None
    compact = [e for e in edits if isinstance(e, dict) and e.get("type") == COMPACT_EDIT]
    if not compact:
        return dict(body), False, None
    trigger = compact[-1].get("trigger")
    value = trigger.get("value") if isinstance(trigger, dict) else None
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise RequestError("the compaction edit's trigger value must be a non-negative integer")
    others = [e for e in edits if not (isinstance(e, dict) and e.get("type") == COMPACT_EDIT)]
    rest = {k: v for k, v in body.items() if k != "context_management"}
    if others:
        rest["context_management"] = {**management, "edits": others}  # type: ignore[dict-item]
    return rest, True, value


def compaction_block(result: CompactionResult | None) -> Json | None:
    """Anthropic's `compaction` block of chatcli's compaction: the summary, then the turns it
    kept, as text (the block stands for everything before it). None: nothing was compacted."""
    if result is None:
        return None
    view = result.messages
    at = next((i for i, m in enumerate(view) if is_summary_message(m)), None)
    if at is None:
        return None
    parts = [view[at].text, *(_rendered(m) for m in view[at + 1 :])]
    return {"type": "compaction", "content": "\n\n".join(p for p in parts if p)}


def _rendered(message: Message) -> str:
    result = message.tool_result
    if result is not None:
        return f"### Tool result (call {result.call_id})\n{result.content}"
    lines = [f"### {message.role.value.capitalize()}", message.text]
    lines += [f"[calls {c.name} {c.arguments_json} (call {c.id})]" for c in message.tool_calls]
    return "\n".join(line for line in lines if line)


def _blocks(turn: Mapping[str, Any]) -> list[Any]:
    content = turn.get("content")
    return content if isinstance(content, list) else []


def _summary_of(block: Any) -> str | None:
    """The summary of a `compaction` block (None: not one, or a failed compaction whose
    content is null, which the API treats as no compaction)."""
    if not isinstance(block, dict) or block.get("type") != "compaction":
        return None
    content = block.get("content")
    return content if isinstance(content, str) and content else None


def _last_compaction(blocks: list[Any]) -> int:
    return max(i for i, block in enumerate(blocks) if _summary_of(block) is not None)


def sealed_of(request: ClientRequest, result: CompactionResult | None) -> Sealed:
    """What `result`, chatcli's compaction of `request`, leaves: its summary and the input
    items of the turns after it. None (nothing could be compacted): every turn, unchanged."""
    turns = request.raw_messages
    if result is None:
        return Sealed(summary="", kept=_flat(t for t in turns if not _is_system(t[0])))
    view = result.messages
    at = next((i for i, m in enumerate(view) if is_summary_message(m)), None)
    if at is None:  # no summary in the view: it was cut instead
        return Sealed(summary="", kept=_flat(t for t in turns if not _is_system(t[0])))
    tail = len(view) - at - 1
    return Sealed(summary=view[at].text, kept=_flat(turns[len(turns) - tail :] if tail else ()))


def told(sealed: Sealed) -> str:
    """What a compaction left, for the log."""
    summary = f"a summary of {len(sealed.summary)} chars" if sealed.summary else "no summary"
    return f"{summary} and {len(sealed.kept)} input items kept verbatim"


def user_messages(items: Sequence[Any]) -> list[Json]:
    """The user messages of `items`, as `CompactedResponse.output` begins."""
    return [
        {
            "type": "message",
            "id": f"msg_{uuid.uuid4().hex}",
            "role": "user",
            "status": "completed",
            "content": _content(item.get("content")),
        }
        for item in items
        if isinstance(item, dict) and _type(item) == "message" and item.get("role") == "user"
    ]


def _content(content: Any) -> list[Json]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _flat(turns: Any) -> tuple[Json, ...]:
    return tuple(item for turn in turns for item in turn)


def _type(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    return str(kind) if kind else "message"


def _is_system(item: Any) -> bool:
    return _type(item) == "message" and item.get("role") in _SYSTEM_ROLES
