"""Proxy traffic in the session store: each client conversation is a session, so
`chatcli sessions list`, `/cost` and the exporters see it; and what one replica learns about
the upstream's window is every replica's.

Grouping. A request names its conversation with the `x-chatcli-session` header; without it,
the conversation is known by a hash of its system prompt (the system messages before its
first user message) and first user message (`px` and 14 hex digits), which every request of
it repeats. The session is the one of that key whose
transcript the client's messages extend: the client resends its whole history each time,
and only what is new (its new messages, then the answer) is appended. A client that edited
or regenerated earlier history extends none of them: a new branch session `KEY~N` starts,
holding the conversation as sent. Nothing stored is ever rewritten. Messages are compared as
a client resends them (role, text, tool calls, tool result), not byte for byte.

Recording. `SessionRecorder` writes on one background thread, so the event loop never waits
for the database; the records that arrive while it commits are committed together next, in
one transaction (one fsync for all of them: group commit), in the order of their
conversations' keys (so two replicas' batches never wait on each other's locks in a cycle).
If a batch fails, its records are written one by one, each failing alone. A request's
record (its new messages, the answer, usage, cost, recovery events and the view it sent) is
committed in one transaction before the end of its answer is sent (the JSON body; for a stream, the
rest of the text, the finish and the end events): a request is *acknowledged* when the
client has that end, and an acknowledged request is recorded, exactly once. A stream cut
before its end (the client went away, the replica died) is not acknowledged; its record may
be missing. A request that failed is recorded too (tag `proxy-failed`, no answer). If the
store itself fails, the answer is still sent and the error is logged and counted
(`chatcli_proxy_store_errors_total`): the proxy keeps serving without its store.

Sticky cuts. Once a recovery level has cut a conversation's view, its next requests keep the
cut and grow after it (`chatcli.history.sticky`), so the upstream's prompt cache keeps its
prefix. `StickyViews` keeps each conversation's latest cut, by its key: in memory (the
latest used `KNOWN_CUTS`) and, with a recorder, in the store, by reference as the chat keeps
its own (the session's `sticky_view`: the request whose stored view it is, how many messages
it covers and their digest; `conversation_cuts` names the session, KEY or KEY~N, that holds
the latest one), written in the transaction of the request that made it. So every replica
on the store starts the next request from the same cut; one whose history does not extend
the cut one (edited, rewound) gets a fresh cut.

Last requests. chatcli's compaction of a conversation asks for its summary after the
conversation's last request, on the upstream's prompt cache (`chatcli.compaction.warm`).
`SentRequests` keeps, by key, the request each conversation's last answer came from
(`Client.last_sent`), in memory only (the latest used `KNOWN_CUTS`): a replica that did not
answer that request compacts with the rendered request instead.

Keys. `key` and `keys` give the secrets the replicas share (the keys sealing the proxy's
compaction tokens, `chatcli.proxy.keys`), kept in the store.

Windows. An overflow that states the window (`OverflowDetected.limit`) is stored with
`SessionStore.learn_window` under the upstream's name and redacted URL; each replica reads
them back (at most every `WINDOW_REFRESH_S`), and a request to an upstream that states no
window of its own is pre-flighted against the learned one: the failed call is paid once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from chatcli.catalog import lookup
from chatcli.chat.stored import stored_event
from chatcli.compaction import PreviousRequest, SentRequest
from chatcli.cost import usage_cost
from chatcli.events import Continued, Escalated, Event, OverflowDetected
from chatcli.history.sticky import StickyView
from chatcli.messages import Message, Role, Usage
from chatcli.recovery import Reply
from chatcli.store import SessionInfo, SessionStore, StoredStickyView
from chatcli.store.views import body_digest, dump_json
from chatcli.wire.dialect import RequestError

__all__ = [
    "SESSION_HEADER",
    "WINDOW_REFRESH_S",
    "ProxyRecord",
    "SentRequests",
    "SessionRecorder",
    "StickyViews",
    "fingerprint",
    "place",
    "session_key",
]

logger = logging.getLogger("chatcli.proxy")

SESSION_HEADER = "x-chatcli-session"
WINDOW_REFRESH_S = 1.0  # how stale a replica's copy of the learned windows may be
MAX_BATCH = 64  # records per group commit: a bound on one transaction's size and locks
KNOWN_SESSIONS = 1000  # sessions whose fingerprints the writer keeps (the latest used)
KNOWN_CUTS = 1000  # conversations whose sticky cut a replica keeps in memory (the latest used)
BRANCH = "~"  # KEY~N: a branch of conversation KEY (never in a header's key)
_HEADER_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
_TITLE_CHARS = 60


def session_key(headers: Mapping[str, str], messages: Sequence[Message]) -> str:
    """The conversation a request belongs to (module docstring); RequestError: a header
    value that cannot be a session id."""
    named = headers.get(SESSION_HEADER)
    if named is not None:
        if not _HEADER_KEY.fullmatch(named):
            raise RequestError(
                f"{SESSION_HEADER}: {named[:80]!r} is not a session id (1-64 letters, digits,"
                " '.', '_', ':' or '-', starting with a letter or digit)"
            )
        return named
    system: list[str] = []
    first = ""
    for message in messages:  # up to the first user message: what every request repeats
        if message.role is Role.USER:
            first = message.text
            break
        if message.role is Role.SYSTEM:
            system.append(message.text)
    return "px" + body_digest(dump_json([system, first]))[:14]


def fingerprint(message: Message) -> str:
    """What a client resends of a message, as a digest: the role, the text, the tool calls
    and the tool result (not provider details, which a client may drop or reshape)."""
    calls = [[c.id, c.name, c.arguments] for c in message.tool_calls]
    result = message.tool_result
    shown = None if result is None else [result.call_id, result.content, result.is_error]
    return body_digest(dump_json([message.role.value, message.text, calls, shown]))


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyRecord:
    """One request as the store keeps it: the conversation as the client sent it, the answer
    (None: the request failed), what the request cost and did, and the sticky cut it made
    (None: it made none), which is its view."""

    key: str
    messages: tuple[Message, ...]
    reply: Reply | None
    events: tuple[Event, ...] = ()
    model: str | None = None
    cut: StickyView | None = None


@dataclass(kw_only=True)
class _Known:
    """The fingerprints of a session's transcript this process has read (a cache)."""

    prints: list[str] = field(default_factory=list)


def place(
    store: SessionStore, key: str, prints: Sequence[str], known: dict[str, _Known]
) -> tuple[str | None, int]:
    """The session of conversation `key` whose transcript the client's messages (their
    `prints`) extend, the longest one, and how many of them it holds; (None, n): no session
    does, and the new one is named `KEY~n` (or `KEY` when n is 0)."""
    candidates = [s for s in store.find_sessions(key) if s.id == key or _branch_of(s.id, key)]
    best: tuple[str | None, int] = (None, -1)
    for info in candidates:
        stored = _prints(store, info, known)
        extended = len(stored) <= len(prints) and stored == list(prints[: len(stored)])
        if extended and len(stored) > best[1]:
            best = (info.id, len(stored))
    if best[0] is None:
        return None, len(candidates)
    return best


def _branch_of(session_id: str, key: str) -> bool:
    return session_id.startswith(key + BRANCH) and session_id[len(key) + 1 :].isdigit()


def _prints(store: SessionStore, info: SessionInfo, known: dict[str, _Known]) -> list[str]:
    """The session's fingerprints, reading only the messages not read before."""
    cached = known.pop(info.id, None) or _Known()
    known[info.id] = cached  # the most recently used last: the first to go is the oldest
    if len(cached.prints) != info.message_count:
        if len(cached.prints) > info.message_count:  # deleted and made again: start over
            cached.prints = []
        new = store.transcript(info.id, after=len(cached.prints))
        cached.prints.extend(fingerprint(m) for m in new)
    return cached.prints


class SessionRecorder:
    """Records proxy requests in `store` on a background thread, and shares learned windows
    (module docstring). `upstream`: the provider and its redacted URL (the windows' scope);
    `settings`: the SessionInfo fields a new session gets (provider, model, base_url, ...)."""

    def __init__(
        self,
        store: SessionStore,
        *,
        upstream: str,
        settings: Mapping[str, Any] | None = None,
        on_error: Callable[[BaseException], None] = lambda exc: None,
    ) -> None:
        self.store = store
        self.upstream = upstream
        self.settings = dict(settings or {})
        self.on_error = on_error
        self._known: dict[str, _Known] = {}
        self._windows: dict[str, int] = {}
        self._windows_read = -WINDOW_REFRESH_S  # monotonic time of the last read
        self._jobs: queue.Queue[tuple[str, Callable[[], Any], Future[Any]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="chatcli-recorder", daemon=True)
        self._thread.start()

    # the request path --------------------------------------------------------------------

    async def record(self, record: ProxyRecord) -> None:
        """Commit `record` (on the writer thread); returns once it is committed. A store
        error is logged and handed to `on_error`, never raised: the answer still goes out."""
        try:
            await asyncio.wrap_future(self._submit(lambda: self._write(record), record.key))
        except Exception as exc:
            logger.error("chatcli proxy: recording a request failed: %s", exc)
            self.on_error(exc)

    async def window(self, model: str) -> int | None:
        """The window learned for `model` at this upstream (by any replica), if any."""
        if time.monotonic() - self._windows_read > WINDOW_REFRESH_S:
            self._windows_read = time.monotonic()
            try:
                read = await asyncio.to_thread(self.store.learned_windows, self.upstream)
            except Exception as exc:
                logger.error("chatcli proxy: reading learned windows failed: %s", exc)
                self.on_error(exc)
            else:
                self._windows |= read
        return self._windows.get(model)

    async def cut(self, key: str, held: StickyView | None) -> StickyView | None:
        """Conversation `key`'s latest cut in the store, made by any replica (None: it has
        none, or one that names no digest: a chat that resumed the session cut it). `held`:
        this replica's copy, returned as is when it is the stored cut (its view is not read
        again). A store error is logged and handed to `on_error`; then `held` is the answer."""
        try:
            found = await asyncio.to_thread(self.store.conversation_cut, key)
            if found is None:
                return None
            session, stored = found
            digest = stored.digest
            if digest is None:
                return None
            if held is not None and (held.upto, held.digest) == (stored.upto, digest):
                return held
            view = await asyncio.to_thread(self.store.view, session, stored.request_id)
        except Exception as exc:
            logger.error("chatcli proxy: reading a sticky cut failed: %s", exc)
            self.on_error(exc)
            return held
        return StickyView(upto=stored.upto, view=view, digest=digest)

    async def key(self, name: str) -> bytes:
        """The secret `name` every replica on the store shares (`SessionStore.proxy_key`),
        made by the first that asks."""
        new = secrets.token_bytes(32)
        key = await asyncio.wrap_future(self._submit(lambda: self.store.proxy_key(name, new)))
        return bytes(key)

    async def keys(self, prefix: str) -> dict[str, bytes]:
        """The shared secrets whose names begin with `prefix` (`SessionStore.proxy_keys`)."""
        found = await asyncio.wrap_future(self._submit(lambda: self.store.proxy_keys(prefix)))
        return dict(found)

    def learned(self, event: Event, model: str) -> None:
        """An event hook: an overflow that states the window is stored for every replica."""
        if not isinstance(event, OverflowDetected) or event.limit is None:
            return
        limit = event.limit
        self._windows[model] = limit
        self._submit(lambda: self.store.learn_window(self.upstream, model, limit), "")

    def close(self) -> None:
        """Write what is queued, stop the writer, close the store."""
        self._jobs.put(None)
        self._thread.join()
        self.store.close()

    # the writer thread ---------------------------------------------------------------------

    def _submit(self, job: Callable[[], Any], key: str = "") -> Future[Any]:
        done: Future[Any] = Future()
        self._jobs.put((key, job, done))
        return done

    def _work(self) -> None:
        """The writer thread: batches of what is queued, until `close`."""
        while (first := self._jobs.get()) is not None:
            batch = [first]
            while len(batch) < MAX_BATCH and not self._jobs.empty():
                item = self._jobs.get()
                if item is None:  # closing: write this batch, then stop
                    self._jobs.put(None)
                    break
                batch.append(item)
            self._commit(sorted(batch, key=lambda job: job[0]))

    def _commit(self, batch: Sequence[tuple[str, Callable[[], Any], Future[Any]]]) -> None:
        """Run `batch` in one transaction; its results are given once it committed. If it
        fails, each job again on its own (the failed batch wrote nothing)."""
        try:
            with self.store.transaction():
                results = [job() for _, job, _ in batch]
        except Exception as exc:
            self._known.clear()  # it may hold what was rolled back
            if len(batch) == 1:
                batch[0][2].set_exception(exc)
                return
            for _, job, done in batch:
                _settle(done, functools.partial(self._alone, job))
            return
        for (_, _, done), result in zip(batch, results, strict=True):
            done.set_result(result)

    def _alone(self, job: Callable[[], Any]) -> Any:
        try:
            with self.store.transaction():
                return job()
        except Exception:
            self._known.clear()
            raise

    def _write(self, record: ProxyRecord) -> int:
        """Find (or start) the session, append what is new, then the request (inside the
        batch's transaction)."""
        prints = [fingerprint(m) for m in record.messages]
        self.store.lock(f"chatcli.conversation:{record.key}")
        session, held = place(self.store, record.key, prints, self._known)
        if session is None:
            session = record.key if held == 0 else f"{record.key}{BRANCH}{held}"
            self.store.save_session(self._new_session(session, record.messages))
            held = 0
        new = list(record.messages[held:])
        if record.reply is not None:
            new.append(record.reply.message)
        if new:
            self.store.append_messages(session, new)
            self._known.setdefault(session, _Known()).prints.extend(
                [*prints[held:], *([] if record.reply is None else [fingerprint(new[-1])])]
            )
        while len(self._known) > KNOWN_SESSIONS:  # a cache: a session dropped is read again
            del self._known[next(iter(self._known))]
        request_id = self._request(session, record)
        if record.cut is not None and record.reply is not None:
            cut = StoredStickyView(
                request_id=request_id, upto=record.cut.upto, digest=record.cut.digest
            )
            self.store.cut_conversation(record.key, session, cut)
        return request_id

    def _request(self, session: str, record: ProxyRecord) -> int:
        reply = record.reply
        usage = reply.usage if reply is not None else Usage()
        info = lookup(record.model, self.settings.get("provider")) if record.model else None
        cost = usage_cost(usage, info).total
        return self.store.record_request(
            session,
            tag="proxy" if reply is not None else "proxy-failed",
            model=record.model,
            usage=usage,
            cost_usd=cost,
            recovery_cost_usd=_recovery_cost(reply, cost),
            view=None if reply is None else reply.view,
            events=[stored_event(e) for e in record.events],
        )

    def _new_session(self, session_id: str, messages: Sequence[Message]) -> SessionInfo:
        first = next((m.text for m in messages if m.role is Role.USER), "")
        title = " ".join(first.split())[:_TITLE_CHARS] or None
        return replace(SessionInfo.new(**self.settings), id=session_id, title=title)


class StickyViews:
    """Each proxied conversation's sticky cut, by its session key (module docstring): in
    memory, the latest used `size`; with `recorder`, the store's is the one used (another
    replica may have cut since), this replica's copy only when the store cannot be read."""

    def __init__(self, recorder: SessionRecorder | None = None, *, size: int = KNOWN_CUTS) -> None:
        self.recorder = recorder
        self.size = size
        self._cuts: OrderedDict[str, StickyView] = OrderedDict()

    def has_cut(self, key: str) -> bool:
        """Whether this replica holds a cut for conversation `key`: a dict lookup, for a path
        that must not wait for the store (a request of such a conversation must go through
        `Client` with `get`'s cut, or the cut prefix is lost). Another replica's cut is
        found by `get` only."""
        return key in self._cuts

    async def get(self, key: str) -> StickyView | None:
        """The cut a request of conversation `key` starts from (`Client(sticky_view=)`),
        None: none. `Client` checks that the request's history extends the cut one."""
        if self.recorder is None:
            return self.held(key)
        cut = await self.recorder.cut(key, self._cuts.get(key))
        if cut is None:
            self._cuts.pop(key, None)
        else:
            self.keep(key, cut)
        return cut

    def held(self, key: str) -> StickyView | None:
        """`get`'s answer with no recorder (this replica's own cuts only), with no wait."""
        cut = self._cuts.get(key)
        if cut is not None:
            self.keep(key, cut)
        return cut

    def kept(self, key: str, given: StickyView | None, now: StickyView | None) -> StickyView | None:
        """After a request that started from `given`, its Client holds `now`: the new cut it
        made (kept here, and returned for the request's record), or None: it made none."""
        if now is None or now is given:
            return None
        self.keep(key, now)
        return now

    def keep(self, key: str, cut: StickyView) -> None:
        self._cuts[key] = cut
        self._cuts.move_to_end(key)
        while len(self._cuts) > self.size:
            self._cuts.popitem(last=False)


class SentRequests:
    """Each proxied conversation's last answered request, by its session key (module
    docstring): in memory, the latest used `size`."""

    def __init__(self, *, size: int = KNOWN_CUTS) -> None:
        self.size = size
        self._sent: OrderedDict[str, SentRequest] = OrderedDict()

    def keep(self, key: str, sent: SentRequest | None) -> None:
        """`sent` is conversation `key`'s last request now (None: none is known, the last
        one made a cut or failed)."""
        if sent is None:
            self._sent.pop(key, None)
            return
        self._sent[key] = sent
        self._sent.move_to_end(key)
        while len(self._sent) > self.size:
            self._sent.popitem(last=False)

    def previous(self, key: str, messages: Sequence[Message]) -> PreviousRequest | None:
        """The last request of conversation `key`, when `messages` extend what it was made
        from (`SentRequest.previous_for`); None otherwise."""
        sent = self._sent.get(key)
        return None if sent is None else sent.previous_for(messages)


def _recovery_cost(reply: Reply | None, cost: float | None) -> float | None:
    """The part of a request's `cost` that was recovery, as the chat counts it (failed calls
    and continuations, `chatcli.chat.cost`), so `/cost` shows it for proxied sessions
    too: all of a failed request; none of an answer made by one call (a failed call adds no
    usage to a Reply); unknown with continuations (a Reply sums its calls' usage)."""
    if reply is None:
        return cost
    if any(isinstance(event, (Escalated, Continued)) for event in reply.events):
        return None
    return 0.0


def _settle(done: Future[Any], job: Callable[[], Any]) -> None:
    try:
        done.set_result(job())
    except Exception as exc:
        done.set_exception(exc)
