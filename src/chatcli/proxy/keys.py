"""Where the keys sealing the proxy's compaction tokens come from, and how they rotate.

Every worker and replica of one proxy must hold the same keys, or an item one of them made is
refused by the next (`chatcli.proxy.compaction` seals and opens the tokens). The keys come
from, in this order:

- **Configured secrets** (`--compaction-secret`, repeatable, or `CHATCLI_PROXY_COMPACTION_SECRETS`,
  comma-separated; each at least `MIN_SECRET_CHARS` characters): the first seals, every one
  opens. Each key is derived from its secret (HKDF-SHA256), its id from the key (a digest), and
  nothing is stored. To rotate: put the new secret first and keep the old one after it for the
  items' lifetime (`--compaction-ttl`), then remove it.
- **The session store**, without configured secrets: one key per period as long as the items'
  lifetime, named by its length and number (`t2592000p681`: the 681st 30-day period since the
  epoch), made by the first replica that seals in the period and read by every other
  (`SessionStore.proxy_key`: insert or read, so they agree without talking), kept in the store's
  `proxy_keys` table. A key seals during its period and opens during the next one: an item is at
  most a lifetime old when opened, and a token dated after its key's period was not made with
  it, so an old key can make nothing new. Rotation is automatic. To retire every key at once,
  delete the table's rows named `compaction.*` (every item made before is then refused:
  clients compact again). The key sits beside the transcripts, whose summaries the items hold:
  it gives whoever reads the database nothing the database does not already hold.
- **Made when the proxy starts**, with neither: the process's own key, gone with it.
  `chatcli proxy --workers N` then makes one secret in the parent process and hands it to
  every worker (their environment), so they open each other's items until the proxy stops; a
  worker app started by another process manager with nothing to share refuses to start
  (`chatcli.proxy.main.worker_app`).

`SealingKeys.sealer` gives the `Sealer` of the moment: with the store, it makes or reads the
current period's key when the period begins, and reads the store again (at most every
`KEY_REFRESH_S`) when a token names a key it does not hold (one another replica just made).
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from chatcli.errors import ConfigError
from chatcli.proxy.compaction import Sealer, SealingKey
from chatcli.proxy.sessions import SessionRecorder
from chatcli.wire.dialect import Failure, FailureKind, Refused

__all__ = [
    "DEFAULT_TTL_S",
    "KEY_REFRESH_S",
    "MIN_SECRET_CHARS",
    "SECRETS_ENV",
    "SealingConfig",
    "SealingKeys",
    "configured_key",
    "generated_key",
    "new_secret",
    "sealing_config",
]

logger = logging.getLogger("chatcli.proxy")

SECRETS_ENV = "CHATCLI_PROXY_COMPACTION_SECRETS"
DEFAULT_TTL_S = 30 * 86400.0  # how long an item opens (and a stored key's period)
MIN_SECRET_CHARS = 32  # a shorter secret could be guessed: the key is derived, not stretched
KEY_REFRESH_S = 1.0  # the store is read again for a key id it lacks at most this often
_STORED = "compaction."  # the store's names of these keys: compaction.<kid>
_PERIOD_KID = re.compile(r"t(\d+)p(\d+)")
_DERIVED = b"chatcli proxy compaction tokens"


@dataclass(frozen=True, slots=True, kw_only=True)
class SealingConfig:
    """The proxy's sealing settings: configured `secrets` (the first seals; none: the store's
    keys, else one made at start) and how long an item opens, in seconds (`ttl`)."""

    secrets: tuple[str, ...] = ()
    ttl: float = DEFAULT_TTL_S

    def __repr__(self) -> str:  # never the secrets
        return f"SealingConfig(secrets=<{len(self.secrets)}>, ttl={self.ttl!r})"


def sealing_config(
    given: Sequence[str], environ: Mapping[str, str], *, ttl_days: float | None = None
) -> SealingConfig:
    """The settings from `--compaction-secret` values, `CHATCLI_PROXY_COMPACTION_SECRETS`
    (comma-separated) and `--compaction-ttl`; a secret too short is a ConfigError."""
    found = [*given, *environ.get(SECRETS_ENV, "").split(",")]
    chosen = tuple(s.strip() for s in found if s.strip())
    for secret in chosen:
        if len(secret) < MIN_SECRET_CHARS:
            raise ConfigError(
                f"a compaction secret (--compaction-secret or {SECRETS_ENV}) must be at least "
                f"{MIN_SECRET_CHARS} characters: make one with `openssl rand -base64 32`"
            )
    ttl = DEFAULT_TTL_S if ttl_days is None else ttl_days * 86400.0
    return SealingConfig(secrets=chosen, ttl=ttl)


def new_secret() -> str:
    """A random secret of the kind `--compaction-secret` takes."""
    return secrets.token_urlsafe(32)


def configured_key(secret: str) -> SealingKey:
    """The key a configured secret stands for, its id a digest of the key."""
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_DERIVED)
    key = hkdf.derive(secret.encode())
    return SealingKey(kid="s" + hashlib.sha256(key).hexdigest()[:12], secret=key)


def generated_key() -> SealingKey:
    """A random key of this process alone."""
    key = secrets.token_bytes(32)
    return SealingKey(kid="g" + hashlib.sha256(key).hexdigest()[:12], secret=key)


def stored_key(kid: str, secret: bytes) -> SealingKey:
    """A key of the store, which sealed until its period ended (module docstring)."""
    period = _PERIOD_KID.fullmatch(kid)
    until = None if period is None else (int(period[2]) + 1) * float(period[1])
    return SealingKey(kid=kid, secret=secret, sealed_until=until)


def period_kid(now: float, ttl: float) -> str:
    """The id of the store's key for the period `now` falls in."""
    length = max(1, round(ttl))
    return f"t{length}p{math.floor(now / length)}"


class SealingKeys:
    """The keys of one proxy process (module docstring): its configured or generated ones, or
    the store's, read through `sessions`; `on_error` hears of a store that failed."""

    def __init__(
        self,
        config: SealingConfig,
        sessions: SessionRecorder | None,
        *,
        on_error: Callable[[BaseException], None] = lambda exc: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self._clock = clock
        self._on_error = on_error
        self._sessions = None if config.secrets else sessions
        self._stored: dict[str, SealingKey] = {}
        self._read_at = -math.inf
        self._own: Sealer | None = None
        if self._sessions is None:
            own = [configured_key(s) for s in config.secrets] or [generated_key()]
            self._own = Sealer(own, ttl=config.ttl, clock=clock)
        if self._sessions is None and not config.secrets:
            logger.info("chatcli proxy: compaction items are sealed with this process's own key")

    async def sealer(self, wanted: str | None = None) -> Sealer:
        """The Sealer of the moment, holding the key `wanted` (a token's key id) if the keys'
        source has it; Refused (503) when the store that keeps them cannot be read."""
        if self._own is not None:
            return self._own
        assert self._sessions is not None  # no keys of its own: the store's
        current = period_kid(self._clock(), self.config.ttl)
        stale = self._clock() - self._read_at >= KEY_REFRESH_S
        if current not in self._stored or (wanted not in (None, *self._stored) and stale):
            await self._read(self._sessions, current)
        others = (key for kid, key in self._stored.items() if kid != current)
        return Sealer([self._stored[current], *others], ttl=self.config.ttl, clock=self._clock)

    async def _read(self, sessions: SessionRecorder, current: str) -> None:
        """Every key the store holds, the current period's made if it is not there yet."""
        try:
            found = await sessions.keys(_STORED)
            if _STORED + current not in found:
                found[_STORED + current] = await sessions.key(_STORED + current)
        except Exception as exc:
            logger.error("chatcli proxy: reading the compaction keys failed: %s", exc)
            self._on_error(exc)
            if current in self._stored:
                return  # a key it lacks stays unknown; the current one seals on
            message = "the session store, which keeps the compaction keys, cannot be read"
            failure = Failure(
                kind=FailureKind.OVERLOADED, status=503, message=message, retry_after=1
            )
            raise Refused(failure) from exc
        self._read_at = self._clock()
        self._stored = {
            name[len(_STORED) :]: stored_key(name[len(_STORED) :], secret)
            for name, secret in found.items()
        }
