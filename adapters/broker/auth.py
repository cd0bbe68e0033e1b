"""Who may log in, and what they may do once in.

:class:`Auth` is the broker's policy (its :class:`~.users.Users`, whether
ANONYMOUS is on, the loopback rule); each connection gets a :class:`Login`
from it, which builds the SASL mechanisms offered to that peer, learns who
logged in, decides which vhosts it may open, and checks each command against
the user's permissions (:data:`ACCESS`).  Failed logins are logged (never
with a secret) and slow the source down (:class:`LoginGuard`).  Nothing here
reads a clock: time is the broker's ``now``, passed in.
"""

from __future__ import annotations

__all__ = ["ACCESS", "ACCESS_0_10", "ACCESS_0_9_1", "Auth", "Login", "LoginGuard", "Peer",
           "AccessRefused"]

import ipaddress
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from amqp_sansio import sasl
from amqp_sansio.v0_9_1.amqplain import NAME as AMQPLAIN
from amqp_sansio.v0_9_1.amqplain import AmqplainServer

from .users import FULL, Permission, Users

log = logging.getLogger("amqp_sansio.broker.auth")

#: What each command needs: (permission, the field naming the resource),
#: RabbitMQ's access-control table in 0-10 terms (queue.bind is
#: exchange.bind here; basic.publish is message.transfer, whose destination
#: is the exchange).  Passive declares need nothing; a declare naming an
#: alternate exchange also needs write on it and read on what is declared
#: (RabbitMQ's rule for alternate and dead-letter exchanges).  The default
#: exchange ("") is checked as "amq.default".
ACCESS_0_10: Final[Mapping[str, tuple[tuple[str, str], ...]]] = {
    "queue.declare": (("configure", "queue"),),
    "queue.delete": (("configure", "queue"),),
    "queue.purge": (("read", "queue"),),
    "exchange.declare": (("configure", "exchange"),),
    "exchange.delete": (("configure", "exchange"),),
    "exchange.bind": (("write", "queue"), ("read", "exchange")),
    "exchange.unbind": (("write", "queue"), ("read", "exchange")),
    "message.subscribe": (("read", "queue"),),
    "message.transfer": (("write", "destination"),),
    "file.consume": (("read", "queue"),),
    "stream.consume": (("read", "queue"),),
    "file.publish": (("write", "exchange"),),
    "stream.publish": (("write", "exchange"),),
}
ACCESS = ACCESS_0_10  # the name it had
#: The same table in 0-9-1's own terms (RabbitMQ's): an exchange-to-exchange
#: binding needs write on its destination and read on its source; the
#: alternate and dead-letter exchanges are declare arguments there.
ACCESS_0_9_1: Final[Mapping[str, tuple[tuple[str, str], ...]]] = {
    "queue.declare": (("configure", "queue"),),
    "queue.delete": (("configure", "queue"),),
    "queue.purge": (("read", "queue"),),
    "queue.bind": (("write", "queue"), ("read", "exchange")),
    "queue.unbind": (("write", "queue"), ("read", "exchange")),
    "exchange.declare": (("configure", "exchange"),),
    "exchange.delete": (("configure", "exchange"),),
    "exchange.bind": (("write", "destination"), ("read", "source")),
    "exchange.unbind": (("write", "destination"), ("read", "source")),
    "basic.consume": (("read", "queue"),),
    "basic.get": (("read", "queue"),),
    "basic.publish": (("write", "exchange"),),
}
_DECLARES: Final = {"queue.declare": "queue", "exchange.declare": "exchange"}
#: Fields naming exchanges (the default one is checked as "amq.default").
_EXCHANGE_FIELDS: Final = frozenset({"exchange", "destination", "source"})
#: Declare arguments naming another exchange (0-9-1).
_NAMED_IN_ARGUMENTS: Final = ("alternate-exchange", "x-dead-letter-exchange")
_LONGEST_NAME_LOGGED: Final = 64


class AccessRefused(Exception):
    """The user may not do this (0-10: execution.exception unauthorized-access)."""

    def __init__(self, text: str, field: str | None) -> None:
        super().__init__(text)
        self.text = text
        self.field = field


def required(command: Any, table: Mapping[str, tuple[tuple[str, str], ...]] = ACCESS_0_10
             ) -> list[tuple[str, str, str]]:
    """``(permission, resource name, field)`` checks ``command`` needs
    (``table``: its protocol's, :data:`ACCESS_0_10` or :data:`ACCESS_0_9_1`)."""
    name = command.NAME
    rules = table.get(name)
    if rules is None or getattr(command, "passive", False):
        return []
    out = []
    for perm, field in rules:
        out.append((perm, getattr(command, field) or "", field))
    if name in _DECLARES:
        alternates = [(getattr(command, "alternate_exchange", None), "alternate_exchange")]
        args = getattr(command, "arguments", None) or {}
        alternates += [(args.get(k), "arguments") for k in _NAMED_IN_ARGUMENTS]
        for alternate, field in alternates:
            if alternate and isinstance(alternate, str):
                out.append(("write", alternate, field))
                out.append(("read", getattr(command, _DECLARES[name]) or "", _DECLARES[name]))
    return out


def _shown(name: str) -> str:
    """A peer-chosen name as it may appear in a log line (bounded, escaped)."""
    return repr(name[:_LONGEST_NAME_LOGGED] + ("..." if len(name) > _LONGEST_NAME_LOGGED
                                                else ""))


@attrs.frozen
class Peer:
    """The other end of a transport, as the I/O layer saw it."""

    host: str | None = None  # None: in memory (a test's pump): counts as loopback
    port: int | None = None
    tls: bool = False
    #: The client certificate TLS verified (``SSLSocket.getpeercert()``), if any.
    certificate: Mapping[str, Any] | None = None

    @property
    def loopback(self) -> bool:
        if self.host is None:
            return True
        try:
            return ipaddress.ip_address(self.host.split("%")[0]).is_loopback
        except ValueError:
            return False

    @property
    def common_name(self) -> str | None:
        """The certificate subject's common name: the EXTERNAL identity."""
        for rdn in (self.certificate or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName" and isinstance(value, str) and value:
                    return value
        return None

    def __str__(self) -> str:
        if self.host is None:
            return "in-memory"
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@attrs.define
class _Source:
    failures: int = 0
    last_failure: float = float("-inf")
    blocked_until: float = float("-inf")


class LoginGuard:
    """A growing delay after failed logins, per source address.

    Each failure from a source pushes the time the broker next answers a
    login from it (success or failure) ``first * factor**(n-1)`` seconds
    further (at most ``longest`` per failure), so answers to a source that
    keeps failing come out one per ``longest`` seconds however many
    connections it opens -- but never more than ``cap`` seconds ahead of
    now: a flood of failures cannot lock the right password out of that
    address for longer than that.  A login that succeeds clears its
    source's record.  A source is forgotten ``forget_after`` seconds after
    its last failure; at most ``max_sources`` are remembered.
    """

    def __init__(self, first: float = 0.25, factor: float = 2.0, longest: float = 8.0,
                 forget_after: float = 60.0, max_sources: int = 4096,
                 cap: float = 30.0) -> None:
        self.first, self.factor, self.longest, self.cap = first, factor, longest, cap
        self.forget_after, self.max_sources = forget_after, max_sources
        self._sources: dict[str, _Source] = {}

    def answer_at(self, source: str, now: float) -> float:
        """When a login answer to ``source`` may go out (<= now: at once)."""
        s = self._sources.get(source)
        return s.blocked_until if s is not None else now

    def failed(self, source: str, now: float) -> tuple[int, float]:
        """Record a failure; ``(recent failures, when its answer may go out)``."""
        s = self._sources.pop(source, None)  # re-inserted: dict order = recency
        if s is None or now - s.last_failure > self.forget_after:
            s = _Source(blocked_until=s.blocked_until if s is not None else now)
        s.failures += 1
        s.last_failure = now
        delay = min(self.longest, self.first * self.factor ** min(s.failures - 1, 64))
        s.blocked_until = min(max(s.blocked_until, now) + delay, now + self.cap)
        self._sources[source] = s
        if len(self._sources) > self.max_sources:
            self._forget(now)
        return s.failures, s.blocked_until

    def succeeded(self, source: str) -> None:
        """A login from ``source`` succeeded: its failures are forgotten."""
        self._sources.pop(source, None)

    def _forget(self, now: float) -> None:
        for key, s in list(self._sources.items()):
            if s.blocked_until < now and now - s.last_failure > self.forget_after:
                del self._sources[key]
        while len(self._sources) > self.max_sources:
            del self._sources[next(iter(self._sources))]  # the least recent


class Auth:
    """The broker's login and permission policy.

    ``users`` None is the loopback default: guest/guest and ANONYMOUS with
    every permission, admitted from loopback peers only.  Otherwise the
    given users (a :class:`Users`, or ``{name: password}`` for users with
    every permission) from anywhere, ANONYMOUS only if ``anonymous``.
    """

    def __init__(self, users: Users | Mapping[str, str] | None = None, *,
                 anonymous: bool | None = None, vhosts: tuple[str, ...] | None = ("/",),
                 guard: LoginGuard | None = None) -> None:
        self.loopback_only = users is None
        #: The vhosts that may be opened (None: any); a users file names its own.
        self.vhosts = vhosts
        if users is None:
            self.users = Users.loopback_default()
        elif isinstance(users, Users):
            self.users = users
            self.vhosts = users.vhosts
        else:
            self.users = Users.from_passwords(users)
        self.anonymous = self.loopback_only if anonymous is None else anonymous
        self.guard = guard or LoginGuard()

    def describe(self) -> str:
        """One line for the start-up log: who may log in."""
        if self.loopback_only:
            return ("logins: guest/guest and ANONYMOUS, from loopback peers only (the "
                    "default for tests; give a users file to require real users)")
        mechs = "SCRAM-SHA-256, PLAIN, EXTERNAL (TLS client certificates)"
        return (f"logins: {len(self.users.users)} user(s) ({mechs}); ANONYMOUS "
                f"{'on' if self.anonymous else 'off'}")

    def login(self, peer: Peer | None, clock: Callable[[], float]) -> Login:
        return Login(self, peer or Peer(), clock)


class Login:
    """One connection's authentication, and its user's permissions."""

    def __init__(self, auth: Auth, peer: Peer, clock: Callable[[], float]) -> None:
        self.auth = auth
        self.peer = peer
        self._clock = clock  # the broker's latest ``now``
        self.identity: str | None = None
        self.hold_until = float("-inf")  # no output before this (a login answer held back)
        self._tried: str | None = None  # the name the peer presented
        users = auth.users
        cn = peer.common_name

        def check(name: str, password: str) -> bool:
            self._tried = name
            return users.check_password(name, password)

        def lookup(name: str) -> sasl.ScramCredentials | None:
            self._tried = name
            return users.scram_lookup(name)

        if cn is not None and cn not in users.users:
            # EXTERNAL only for a certificate that names a user: clients that
            # take EXTERNAL whenever offered (py-amqp, so kombu and Celery) would
            # be refused though their password works (RabbitMQ offers it only
            # when configured to).
            log.info("%s: the client certificate's name %s is no user: EXTERNAL not "
                     "offered", peer, _shown(cn))
            cn = None
        base = sasl.ServerAuthenticator.standard(
            check_password=check, scram_lookup=lookup, anonymous=auth.anonymous,
            external_identity=cn)
        guarded = [(name, self._guarded(name, base)) for name in base.mechanisms]
        self.authenticator = sasl.ServerAuthenticator(guarded)
        # 0-9-1 clients also know AMQPLAIN (RabbitMQ's), offered after PLAIN.
        after = next((i + 1 for i, (n, _) in enumerate(guarded) if n == "PLAIN"), len(guarded))
        amqplain = (AMQPLAIN, lambda: _Watched(AmqplainServer(check), self))
        self.authenticator_0_9_1 = sasl.ServerAuthenticator(
            guarded[:after] + [amqplain] + guarded[after:])

    def _guarded(self, name: str, base: sasl.ServerAuthenticator
                 ) -> Callable[[], sasl.ServerMechanism]:
        return lambda: _Watched(base.create(name), self)

    # -- outcomes (called by _Watched) ----------------------------------------------
    def admit(self, mechanism: str, identity: str) -> bool:
        """May ``identity`` (authenticated) log in from this peer?"""
        if mechanism == "ANONYMOUS":
            self._tried = "anonymous"
            ok = self.auth.anonymous and (self.peer.loopback or not self.auth.loopback_only)
        else:
            self._tried = identity
            known = identity in self.auth.users.users
            ok = known and (self.peer.loopback or not self.auth.loopback_only)
        if not ok:
            return False
        self.identity = identity
        now = self._clock()
        self.hold_until = self.auth.guard.answer_at(self._source, now)
        self.auth.guard.succeeded(self._source)
        log.info("login: %s as %s (%s)", self.peer, _shown(identity), mechanism)
        return True

    def failed(self, mechanism: str) -> None:
        now = self._clock()
        count, at = self.auth.guard.failed(self._source, now)
        self.hold_until = at
        tried = _shown(self._tried) if self._tried is not None else "(no name)"
        log.warning("login failed: %s, mechanism %s, user %s (%d recent failure(s) from "
                    "this address; answered after %.2f s)", self.peer, mechanism, tried,
                    count, max(0.0, at - now))

    @property
    def _source(self) -> str:
        return self.peer.host or "in-memory"

    # -- after the login ---------------------------------------------------------------
    def permission(self, vhost: str) -> Permission | None:
        """The user's permission on ``vhost`` (None: may not open it)."""
        if self.identity is None:
            return None
        if self.auth.loopback_only:
            return FULL
        if self.identity not in self.auth.users.users and self.auth.anonymous:
            return FULL  # ANONYMOUS, unless the file has a user "anonymous"
        return self.auth.users.permission(self.identity, vhost)

    def may_open(self, vhost: str) -> bool:
        vhost = vhost or "/"  # qpid-python sends none: the default vhost
        vhosts = self.auth.vhosts
        return (vhosts is None or vhost in vhosts) and self.permission(vhost) is not None

    def check(self, vhost: str, command: Any,
              table: Mapping[str, tuple[tuple[str, str], ...]] = ACCESS_0_10) -> None:
        """Raise :class:`AccessRefused` unless the user may run ``command``
        (``table``: the access rules of its protocol)."""
        perm = self.permission(vhost)
        if perm is FULL:
            return
        for kind, name, field in required(command, table):
            resource = ((name or "amq.default") if field in _EXCHANGE_FIELDS
                        or field in ("alternate_exchange", "arguments") else name)
            if perm is None or not perm.allows(kind, resource):
                what = "queue" if field == "queue" else "exchange"
                raise AccessRefused(f"access to {what} {resource!r} in vhost {vhost!r} refused "
                                    f"for user {self.identity!r} ({kind})",
                                    field.replace("_", "-"))


class _Watched:
    """A server mechanism whose outcome the :class:`Login` learns."""

    def __init__(self, inner: sasl.ServerMechanism, login: Login) -> None:
        self._inner = inner
        self._login = login

    @property
    def name(self) -> str:
        return self._inner.name

    def start(self, response: bytes) -> sasl.ServerStep:
        return self._outcome(lambda: self._inner.start(response))

    def step(self, response: bytes) -> sasl.ServerStep:
        return self._outcome(lambda: self._inner.step(response))

    def _outcome(self, fn: Callable[[], sasl.ServerStep]) -> sasl.ServerStep:
        try:
            step = fn()
        except sasl.SaslError:
            self._login.failed(self.name)
            raise
        if step.done and not self._login.admit(self.name, step.identity or ""):
            self._login.failed(self.name)
            raise sasl.AuthenticationFailed()
        return step
