"""Working views stored by reference: a request's view costs a few bytes, not a copy of the
conversation.

A view is a sequence of messages, nearly all of them transcript messages as they are; the
others (a cut tool result, a microcompaction stub, a compaction summary, a recovery notice)
are *view parts*, stored once per session in `view_parts` and shared by every view that
holds them. In memory a view is a tuple of refs: a ref > 0 is a transcript message (its
`seq`), a ref < 0 a view part (minus its id).

A stored view is a `ViewRecord`, written as JSON in `requests.view`: `keep` refs of the view
stored with request `base` (a full one), then `add`, where a run of consecutive transcript
messages is written as `[first, last]`. A record is full (no base) unless a delta against the
session's latest full view is less than half its size, so reading one never takes more than
two rows, and a long agent session whose views share a long prefix stores each once.

A part made from one transcript message (a tool result cut to head and tail) is stored as a
reference to it: `source_seq`, the `head` and `tail` chars its stored body shares with that
message's body, and only the middle (the cut marker) in `body`; a cut result is not stored
twice.

A part that quotes transcript messages by number (the carried-instructions block,
`chatcli.history.carry`, whose `carried` items are whole sentences of user messages, each
with its message's number, shown in its text too) is stored as `quotes`: a JSON list of its
stored body in order, each piece a string or `[seq, start, end]`, a slice of message `seq`'s
stored body where a quoted sentence was found; a block that changes is stored again at a few
bytes per sentence, not as a copy of them. What it quotes is read from its `carried` items,
never from its text.

`ViewIndex` does the bookkeeping for one connection: it finds each message of a view in the
transcript (by a digest of its stored JSON body, the exact string the transcript row holds),
stores the parts, and remembers each session's latest full view.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chatcli.serialize import message_from_dict
from chatcli.store.db import Database

__all__ = [
    "Ref",
    "ViewIndex",
    "ViewRecord",
    "body_digest",
    "dump_json",
    "from_runs",
    "plan_record",
    "to_runs",
]

Ref = int
# A delta is written only when it is under this share of the full record: the rest of the
# time the view becomes the session's new full view, so deltas never chain.
DELTA_MAX_SHARE = 0.5
_SQL_VARIABLES = 500  # ids per IN (...) query, well under SQLite's limit
# A part is stored against the transcript message whose body starts with the same this many
# chars (the role, the tool call's id, the first of its content), when they share at least
# `_MIN_SHARED` chars: below that a reference saves less than it costs to follow.
_SOURCE_KEY_CHARS = 200
_MIN_SHARED = 1000
_MIN_QUOTE = 40  # a shorter sentence is stored as it is: a slice costs ~20 bytes
KNOWN_SESSIONS = 1000  # sessions whose index a ViewIndex keeps (the latest used)


def dump_json(value: Any) -> str:
    """The store's JSON: compact, UTF-8 as is (a message's body is matched by this string)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def body_digest(body: str) -> str:
    """The digest a message's stored JSON body is known by (128 bits, hex)."""
    return hashlib.sha256(body.encode()).hexdigest()[:32]


def to_runs(refs: Sequence[Ref]) -> list[int | list[int]]:
    """Refs as JSON items: consecutive transcript messages as [first, last], the rest as is."""
    items: list[int | list[int]] = []
    for ref in refs:
        last = items[-1] if items else None
        if ref > 0 and isinstance(last, list) and last[1] + 1 == ref:
            last[1] = ref
        elif ref > 0 and isinstance(last, int) and last > 0 and last + 1 == ref:
            items[-1] = [last, ref]
        else:
            items.append(ref)
    return items


def from_runs(items: Sequence[Any]) -> tuple[Ref, ...]:
    """The inverse of `to_runs`."""
    refs: list[Ref] = []
    for item in items:
        if isinstance(item, list):
            refs.extend(range(int(item[0]), int(item[1]) + 1))
        else:
            refs.append(int(item))
    return tuple(refs)


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewRecord:
    """How one view is stored: the first `keep` refs of request `base`'s view (None: none),
    then `add`. Readers ignore keys they do not know, so a field can be added (a sticky cut
    point, say) without a migration."""

    base: int | None = None
    keep: int = 0
    add: tuple[Ref, ...] = ()

    def to_json(self) -> str:
        data: dict[str, Any] = {"add": to_runs(self.add)}
        if self.base is not None:
            data |= {"base": self.base, "keep": self.keep}
        return dump_json(data)

    @classmethod
    def from_json(cls, text: str) -> ViewRecord:
        data = json.loads(text)
        if not isinstance(data, dict) or not isinstance(data.get("add"), list):
            raise ValueError(f"not a stored view record: {text[:80]!r}")
        base = data.get("base")
        return cls(
            base=None if base is None else int(base),
            keep=int(data.get("keep", 0)),
            add=from_runs(data["add"]),
        )


def plan_record(
    refs: tuple[Ref, ...], latest_full: tuple[int, tuple[Ref, ...]] | None
) -> ViewRecord:
    """The record to store `refs` as: a delta against `latest_full` (request id, refs) when
    that is much smaller, else the full view."""
    full = ViewRecord(add=refs)
    if latest_full is None:
        return full
    base, base_refs = latest_full
    keep = _common_prefix(base_refs, refs)
    delta = ViewRecord(base=base, keep=keep, add=refs[keep:])
    small = len(delta.to_json()) < DELTA_MAX_SHARE * len(full.to_json())
    return delta if keep and small else full


def _pick_seq(seqs: list[int] | None, previous: Ref) -> int | None:
    """The transcript message to name for a body found at `seqs` (None: not there). The
    same text can be in the transcript twice (the same answer to the same request): take
    the first one after the previous message, which keeps a run going."""
    if not seqs:
        return None
    after = bisect.bisect_right(seqs, previous)  # the first one after the previous message
    return seqs[after] if after < len(seqs) else seqs[-1]


def _shared_ends(source: str, body: str) -> tuple[int, int]:
    """How many chars `body` shares with `source` at its start and at its end (not
    overlapping in either string)."""
    head = _common_prefix(source, body)
    most = min(len(source), len(body)) - head
    tail = _common_prefix(source[::-1][:most], body[::-1][:most])
    return head, tail


def _common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass(kw_only=True)
class _SessionIndex:
    seqs: dict[str, list[int]] = field(default_factory=dict)  # body digest -> transcript seqs
    upto: int = 0  # the transcript's seqs up to this one are indexed
    starts: dict[str, int] = field(default_factory=dict)  # a long body's first chars -> seq
    parts: dict[str, int] = field(default_factory=dict)  # body digest -> view part id
    latest_full: tuple[int, tuple[Ref, ...]] | None = None
    loaded_full: bool = False


class ViewIndex:
    """Stores and reads views by reference on one connection (see the module docstring).

    Its caches only speed things up: a message another process appended is looked up when a
    view holds it, and a record is correct whatever full view it was based on. It keeps the
    indexes of the latest `KNOWN_SESSIONS` sessions used; one dropped is read again."""

    def __init__(self, conn: Database) -> None:
        self._conn = conn
        self._sessions: OrderedDict[str, _SessionIndex] = OrderedDict()

    # writing ------------------------------------------------------------------------------

    def appended(self, session_id: str, seqs: Sequence[int], bodies: Sequence[str]) -> None:
        """The transcript grew (by this connection): index the new rows if the session is."""
        index = self._sessions.get(session_id)
        if index is not None and seqs and seqs[0] == index.upto + 1:
            for seq, body in zip(seqs, bodies, strict=True):
                _indexed(index, seq, body)

    def record(self, session_id: str, bodies: Sequence[str]) -> ViewRecord:
        """The record for a view whose messages have these stored JSON bodies (view parts
        are stored as needed; call inside the request's transaction)."""
        index = self._index(session_id)
        self._catch_up(session_id, index)  # another process may have appended
        refs: list[Ref] = []
        last_seq = 0
        for body in bodies:
            digest = body_digest(body)
            seq = _pick_seq(index.seqs.get(digest), last_seq)
            if seq is None:
                refs.append(-self._part(session_id, index, digest, body))
            else:
                refs.append(seq)
                last_seq = seq
        if not index.loaded_full:
            index.latest_full, index.loaded_full = self._load_latest_full(session_id), True
        return plan_record(tuple(refs), index.latest_full)

    def starts_empty(self, session_id: str) -> None:
        """No view of the session is stored yet (a migration converting its old ones)."""
        index = self._index(session_id)
        index.latest_full, index.loaded_full = None, True

    def stored(self, session_id: str, request_id: int, record: ViewRecord) -> None:
        """`record` was stored with request `request_id`: a full one is the next base."""
        if record.base is None:
            self._index(session_id).latest_full = (request_id, record.add)

    def forget(self, session_id: str) -> None:
        """The session was deleted (or rolled back): drop what is known of it."""
        self._sessions.pop(session_id, None)

    def _index(self, session_id: str) -> _SessionIndex:
        index = self._sessions.setdefault(session_id, _SessionIndex())
        self._sessions.move_to_end(session_id)
        while len(self._sessions) > KNOWN_SESSIONS:
            self._sessions.popitem(last=False)
        return index

    def _catch_up(self, session_id: str, index: _SessionIndex) -> None:
        rows = self._conn.execute(
            "SELECT seq, body FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq",
            (session_id, index.upto),
        )
        for seq, body in rows:
            _indexed(index, seq, body)

    def _part(self, session_id: str, index: _SessionIndex, digest: str, body: str) -> int:
        if digest not in index.parts:
            source, head, tail = self._source(session_id, index, body)
            middle = body[head : len(body) - tail]
            quotes = None if source is not None else self._quotes(session_id, body)
            self._conn.execute(
                "INSERT INTO view_parts(session_id, digest, body, source_seq, head, tail, quotes)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (session_id, digest, "" if quotes else middle, source, head, tail, quotes),
            )
            (part_id,) = self._conn.execute(
                "SELECT id FROM view_parts WHERE session_id = ? AND digest = ?",
                (session_id, digest),
            ).fetchone()
            index.parts[digest] = int(part_id)
        return index.parts[digest]

    def _source(
        self, session_id: str, index: _SessionIndex, body: str
    ) -> tuple[int | None, int, int]:
        """The transcript message `body` was made from (its seq, and the chars they share at
        each end), or (None, 0, 0): the part is stored whole."""
        seq = index.starts.get(body[:_SOURCE_KEY_CHARS]) if len(body) >= _MIN_SHARED else None
        if seq is None:
            return None, 0, 0
        (source,) = self._conn.execute(
            "SELECT body FROM messages WHERE session_id = ? AND seq = ?", (session_id, seq)
        ).fetchone()
        head, tail = _shared_ends(source, body)
        return (seq, head, tail) if head + tail >= _MIN_SHARED else (None, 0, 0)

    def _quotes(self, session_id: str, body: str) -> str | None:
        """`body` as JSON pieces quoting the transcript messages its `carried` items come
        from (each sentence wherever the body holds it, as JSON writes it), or None when it
        quotes none or that is not shorter."""
        quoted = _quoted_sentences(body)
        if not quoted:
            return None
        sources = self._message_bodies(session_id, {seq for seq, _ in quoted})
        spans: list[tuple[int, int, list[int]]] = []  # (start, end) in body, the slice
        for seq, sentence in quoted:
            start = sources.get(seq, "").find(sentence)
            if start < 0:
                continue
            slice_ = [seq, start, start + len(sentence)]
            at = body.find(sentence)
            while at >= 0:  # bounded: each find starts past the last one
                spans.append((at, at + len(sentence), slice_))
                at = body.find(sentence, at + len(sentence))
        pieces: list[str | list[int]] = []
        at = 0
        for start, end, slice_ in sorted(spans, key=lambda span: span[0]):
            if start >= at:  # one sentence inside another: the first found is used
                pieces += [body[at:start], slice_]
                at = end
        pieces.append(body[at:])
        text = dump_json([p for p in pieces if p != ""])
        return text if len(text) < len(body) else None

    def _message_bodies(self, session_id: str, seqs: set[int]) -> dict[int, str]:
        """The stored JSON bodies of the session's messages `seqs` (those that exist)."""
        found: dict[int, str] = {}
        wanted = sorted(seqs)
        for start in range(0, len(wanted), _SQL_VARIABLES):
            chunk = wanted[start : start + _SQL_VARIABLES]
            marks = ",".join("?" * len(chunk))
            rows = self._conn.execute(
                f"SELECT seq, body FROM messages WHERE session_id = ? AND seq IN ({marks})",
                (session_id, *chunk),
            )
            found.update((int(seq), body) for seq, body in rows)
        return found

    def _load_latest_full(self, session_id: str) -> tuple[int, tuple[Ref, ...]] | None:
        row = self._conn.execute(
            "SELECT id, view FROM requests WHERE session_id = ? AND view IS NOT NULL"
            " ORDER BY id DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        record = ViewRecord.from_json(row[1])
        if record.base is None:
            return int(row[0]), record.add
        return record.base, self.refs(record.base)

    # reading ------------------------------------------------------------------------------

    def refs(self, request_id: int) -> tuple[Ref, ...]:
        """The refs of the view stored with request `request_id` (KeyError: none stored)."""
        record = self._stored_record(request_id)
        if record.base is None:
            return record.add
        return self._stored_record(record.base).add[: record.keep] + record.add

    def bodies(self, session_id: str, refs: Sequence[Ref]) -> list[str]:
        """The stored JSON bodies of the messages `refs` name, in order."""
        found: dict[Ref, str] = {}
        seqs = [r for r in refs if r > 0]
        if seqs:
            rows = self._conn.execute(
                "SELECT seq, body FROM messages WHERE session_id = ? AND seq BETWEEN ? AND ?",
                (session_id, min(seqs), max(seqs)),
            )
            found.update((seq, body) for seq, body in rows)
        parts = sorted({-r for r in refs if r < 0})
        for start in range(0, len(parts), _SQL_VARIABLES):
            chunk = parts[start : start + _SQL_VARIABLES]
            marks = ",".join("?" * len(chunk))
            part_rows = self._conn.execute(
                "SELECT p.id, p.body, m.body, p.head, p.tail, p.quotes FROM view_parts p"
                " LEFT JOIN messages m ON m.session_id = p.session_id AND m.seq = p.source_seq"
                f" WHERE p.session_id = ? AND p.id IN ({marks})",
                (session_id, *chunk),
            ).fetchall()
            quoted = {row[0]: json.loads(row[5]) for row in part_rows if row[5] is not None}
            sources = self._message_bodies(
                session_id, {p[0] for q in quoted.values() for p in q if isinstance(p, list)}
            )
            for part_id, middle, source, head, tail, _ in part_rows:
                pieces = quoted.get(part_id)
                body = _part_body(middle, source, head, tail)
                found[-part_id] = body if pieces is None else _unquoted(pieces, sources)
        missing = [r for r in refs if r not in found]
        if missing:
            raise ValueError(f"a stored view names messages that are not stored: {missing[:5]}")
        return [found[r] for r in refs]

    def _stored_record(self, request_id: int) -> ViewRecord:
        row = self._conn.execute("SELECT view FROM requests WHERE id = ?", (request_id,)).fetchone()
        if row is None or row[0] is None:
            raise KeyError(f"request {request_id} has no stored view")
        return ViewRecord.from_json(row[0])


def _indexed(index: _SessionIndex, seq: int, body: str) -> None:
    index.seqs.setdefault(body_digest(body), []).append(seq)
    if len(body) >= _MIN_SHARED:
        index.starts[body[:_SOURCE_KEY_CHARS]] = seq
    index.upto = seq


def _quoted_sentences(body: str) -> list[tuple[int, str]]:
    """(transcript seq, the sentence as the stored JSON writes it) of each item a stored
    message's `carried` value holds, long enough to be worth a slice."""
    if '"carried":' not in body:
        return []
    message = message_from_dict(json.loads(body))
    items = message.carried.items if message.carried is not None else ()
    return [
        (item.number, dump_json(item.text)[1:-1])
        for item in items
        if item.number is not None and len(item.text) >= _MIN_QUOTE
    ]


def _unquoted(pieces: list[Any], sources: dict[int, str]) -> str:
    """A quoting part's body (see the module docstring) from its pieces."""
    return "".join(p if isinstance(p, str) else sources[p[0]][p[1] : p[2]] for p in pieces)


def _part_body(middle: str, source: str | None, head: int | None, tail: int | None) -> str:
    """A stored part's body: whole, or its middle between the ends of its source message."""
    if source is None or head is None or tail is None:
        return middle
    return source[:head] + middle + source[len(source) - tail :]
