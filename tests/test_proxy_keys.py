"""The compaction items' tokens and their keys (`chatcli.proxy.compaction`, `chatcli.proxy.keys`):
what a token shows, which keys open it, how the keys rotate, and each refusal's cause, with
the clock injected; the stored keys on a real SQLite store shared by two "replicas"."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatcli.errors import ConfigError
from chatcli.proxy.compaction import TOKEN_PREFIX, Sealed, Sealer
from chatcli.proxy.keys import (
    DEFAULT_TTL_S,
    KEY_REFRESH_S,
    SECRETS_ENV,
    SealingConfig,
    SealingKeys,
    configured_key,
    generated_key,
    sealing_config,
    stored_key,
)
from chatcli.proxy.sessions import SessionRecorder
from chatcli.store import SessionStore
from chatcli.wire.dialect import Refused, RequestError

DAY = 86400.0
SECRET_A = "a-secret-of-forty-characters-0123456789ab"
SECRET_B = "b-secret-of-forty-characters-0123456789ab"
SUMMARY = Sealed(
    summary="The ledger migration is half done.", kept=({"role": "user", "content": "x"},)
)


class Clock:
    """Epoch seconds a test moves by hand."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def cause(token: str, sealer: Sealer) -> str:
    """The message `sealer` refuses `token` with."""
    with pytest.raises(RequestError) as caught:
        sealer.open(token)
    assert caught.value.failure.status == 400
    return caught.value.failure.message


def test_a_token_opens_to_what_was_sealed_and_shows_none_of_it() -> None:
    sealer = Sealer([generated_key()], ttl=DEFAULT_TTL_S)
    token = sealer.seal(SUMMARY)
    assert sealer.open(token) == SUMMARY
    assert token.startswith(TOKEN_PREFIX)
    fernet = token.split(".", 3)[3]
    shown = token + base64.urlsafe_b64decode(fernet + "==").decode("latin-1")
    assert "ledger" not in shown and "migration" not in shown  # encrypted, not only signed


def test_each_refusal_says_its_cause() -> None:
    clock = Clock()
    key = configured_key(SECRET_A)
    sealer = Sealer([key], ttl=30 * DAY, clock=clock)
    token = sealer.seal(SUMMARY)
    at = len(token) * 2 // 3
    changed = token[:at] + ("B" if token[at] == "A" else "A") + token[at + 1 :]
    assert cause(changed, sealer).startswith("compaction item refused, altered")
    other = Sealer([generated_key()], ttl=30 * DAY).seal(SUMMARY)
    assert "wrong key" in cause(other, sealer)
    assert "wrong format" in cause("chatcli.c1.e30.bWFj", sealer)
    assert "altered" in cause(TOKEN_PREFIX + key.kid + ".not-a-token", sealer)
    clock.now += 30 * DAY - 60
    assert sealer.open(token) == SUMMARY  # within its lifetime
    clock.now += 120
    assert "expired: it was made 30.0 days ago" in cause(token, sealer)


def test_configured_secrets_rotate_by_their_order() -> None:
    """The first secret seals, the others open: an item of the old secret opens while the
    old secret is kept after the new one, and not once it is removed."""
    old = Sealer([configured_key(SECRET_A)], ttl=DEFAULT_TTL_S)
    token = old.seal(SUMMARY)
    rotated = Sealer([configured_key(SECRET_B), configured_key(SECRET_A)], ttl=DEFAULT_TTL_S)
    assert rotated.open(token) == SUMMARY
    assert rotated.seal(SUMMARY).startswith(TOKEN_PREFIX + configured_key(SECRET_B).kid + ".")
    assert "wrong key" in cause(token, Sealer([configured_key(SECRET_B)], ttl=DEFAULT_TTL_S))
    assert configured_key(SECRET_A) == configured_key(SECRET_A)  # every worker derives it


def test_secrets_come_from_the_flag_and_the_environment_and_must_be_long() -> None:
    config = sealing_config([SECRET_A], {SECRETS_ENV: f" {SECRET_B} ,"}, ttl_days=7)
    assert config == SealingConfig(secrets=(SECRET_A, SECRET_B), ttl=7 * DAY)
    assert SECRET_A not in repr(config) and "secret" not in repr(configured_key(SECRET_A))
    with pytest.raises(ConfigError, match="at least 32 characters"):
        sealing_config([], {SECRETS_ENV: "short"})
    assert sealing_config([], {}) == SealingConfig()


@pytest.fixture
def recorders(tmp_path: Path) -> Iterator[tuple[SessionRecorder, SessionRecorder]]:
    """Two replicas' recorders on one store."""
    one = SessionRecorder(SessionStore(tmp_path / "db"), upstream="u")
    two = SessionRecorder(SessionStore(tmp_path / "db"), upstream="u")
    yield one, two
    one.close()
    two.close()


TTL = 30 * DAY
PERIOD_START = 694 * TTL  # the start of a period of the stored keys (2027-01-01)


def kid_of(token: str) -> str:
    return token[len(TOKEN_PREFIX) :].partition(".")[0]


def test_replicas_on_one_store_share_the_keys_and_rotate_them_each_period(
    tmp_path: Path, recorders: tuple[SessionRecorder, SessionRecorder]
) -> None:
    clock = Clock(PERIOD_START + 25 * DAY)
    one, two = (SealingKeys(SealingConfig(ttl=TTL), r, clock=clock) for r in recorders)

    async def run() -> None:
        made = (await one.sealer()).seal(SUMMARY)
        assert kid_of(made) == "t2592000p694"
        assert (await two.sealer(kid_of(made))).open(made) == SUMMARY  # the other replica
        clock.now += 10 * DAY  # the next period: its key seals, the last one still opens
        later = (await two.sealer()).seal(SUMMARY)
        assert kid_of(later) == "t2592000p695"
        assert (await one.sealer(kid_of(made))).open(made) == SUMMARY
        assert (await one.sealer(kid_of(later))).open(later) == SUMMARY
        clock.now += 25 * DAY  # 35 days after the first item
        opener = await one.sealer(kid_of(made))
        assert "expired" in cause(made, opener)
        assert opener.open(later) == SUMMARY

    asyncio.run(run())
    with SessionStore(tmp_path / "db") as store:
        secrets = store.proxy_keys("compaction.")
    assert sorted(secrets) == [f"compaction.t2592000p{p}" for p in (694, 695, 696)]
    old_key = stored_key("t2592000p694", secrets["compaction.t2592000p694"])
    forged = Sealer([old_key], ttl=TTL, clock=clock).seal(SUMMARY)  # dated now, by an old key
    assert "altered" in cause(forged, asyncio.run(one.sealer()))  # it sealed nothing this late


def test_a_key_another_replica_just_made_is_read_from_the_store(
    recorders: tuple[SessionRecorder, SessionRecorder],
) -> None:
    """A replica whose clock is in the next period already seals with its key; one still in
    the last period reads the store again for the key id it lacks."""
    ahead, behind = Clock(PERIOD_START + TTL + 1), Clock(PERIOD_START + TTL - 1)
    one = SealingKeys(SealingConfig(ttl=TTL), recorders[0], clock=ahead)
    two = SealingKeys(SealingConfig(ttl=TTL), recorders[1], clock=behind)

    async def run() -> None:
        await two.sealer()  # its keys read: the last period's only
        behind.now += KEY_REFRESH_S
        made = (await one.sealer()).seal(SUMMARY)
        assert (await two.sealer(kid_of(made))).open(made) == SUMMARY

    asyncio.run(run())


def test_a_store_that_cannot_be_read_is_a_503_not_a_key_of_ones_own(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "db")
    recorder = SessionRecorder(store, upstream="u")
    store._conn.close()  # the database goes away under the recorder: every read fails
    failures: list[BaseException] = []
    keys = SealingKeys(SealingConfig(), recorder, on_error=failures.append)
    with pytest.raises(Refused) as caught:
        asyncio.run(keys.sealer())
    recorder.close()
    assert caught.value.failure.status == 503 and failures


def test_without_a_store_or_a_secret_the_process_seals_with_its_own_key() -> None:
    keys = SealingKeys(SealingConfig(), None)
    token = asyncio.run(keys.sealer()).seal(SUMMARY)
    assert asyncio.run(keys.sealer()).open(token) == SUMMARY
    assert "wrong key" in cause(token, asyncio.run(SealingKeys(SealingConfig(), None).sealer()))
    configured = SealingKeys(SealingConfig(secrets=(SECRET_A,)), None)
    assert kid_of(asyncio.run(configured.sealer()).seal(SUMMARY)) == configured_key(SECRET_A).kid
