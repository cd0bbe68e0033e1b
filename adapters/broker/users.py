"""The broker's users: hashed credentials and per-vhost permissions.

A users file is JSON (``amqp-sansio broker users add ...`` writes it; the
broker reads it with ``--users FILE``)::

    {"format": "amqp-sansio-users/1",
     "vhosts": ["/", "v2"],
     "users": {"alice": {"scram-sha-256": {"salt": "<b64>", "iterations": 4096,
                                           "stored-key": "<b64>", "server-key": "<b64>"},
                         "permissions": {"v2": {"configure": "^alice\\\\.",
                                                "write": ".*", "read": ".*"}}},
               "cn=robot": {"permissions": {"/": {...}}}}}

Passwords are never stored: a user holds SCRAM-SHA-256 credentials (RFC
5802/7677: PBKDF2-HMAC-SHA-256 of the password with a salt of its own), which
serve both SCRAM-SHA-256 and PLAIN (the presented password is hashed the same
way and compared in constant time).  A user without credentials can log in
only with EXTERNAL (a TLS client certificate whose common name is the user's
name).

Permissions follow RabbitMQ's model: on each vhost a user has three regular
expressions, *configure* (declare, delete), *write* (publish to an exchange,
bind a queue) and *read* (consume from or purge a queue, bind from an
exchange), matched (unanchored, ``re.search``) against the resource's name;
``""`` allows nothing, ``".*"`` everything.  A user with no permissions on a
vhost cannot open it.
"""

from __future__ import annotations

__all__ = ["Permission", "User", "Users", "FULL", "GUEST", "DEFAULT_ITERATIONS"]

import base64
import contextlib
import hmac
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from amqp_sansio import sasl
from amqp_sansio.errors import LocalProtocolError

FORMAT: Final = "amqp-sansio-users/1"
#: PBKDF2 iterations for new credentials: RFC 7677's minimum, as PostgreSQL
#: and Kafka use; each PLAIN login costs the broker one such derivation.
DEFAULT_ITERATIONS: Final = sasl.DEFAULT_SCRAM_ITERATIONS
#: The environment variable naming the users file (``--users``'s default).
USERS_ENV = "AMQP_SANSIO_BROKER_USERS"
#: The loopback default (RabbitMQ's): user guest, password guest.
GUEST: Final = ("guest", "guest")
PERMISSIONS: Final = ("configure", "write", "read")


def _pattern(text: str) -> re.Pattern[str]:
    if not isinstance(text, str):
        raise ValueError("a permission is a regular expression (a string)")
    try:
        # RabbitMQ: "" is a synonym for "^$" (nothing but the empty name).
        return re.compile(text or "^$")
    except re.error as e:
        raise ValueError(f"bad permission regex {text!r}: {e}") from None


@attrs.frozen
class Permission:
    """What a user may do on one vhost: three regexes over resource names."""

    configure: str = ".*"
    write: str = ".*"
    read: str = ".*"
    _compiled: tuple[re.Pattern[str], ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_compiled", tuple(
            _pattern(getattr(self, p)) for p in PERMISSIONS))

    def allows(self, kind: str, name: str) -> bool:
        """May the holder ``kind`` ("configure", "write", "read") ``name``?"""
        return self._compiled[PERMISSIONS.index(kind)].search(name) is not None

    def to_json(self) -> dict[str, str]:
        return {p: getattr(self, p) for p in PERMISSIONS}

    @classmethod
    def from_json(cls, data: object) -> Permission:
        if not isinstance(data, dict) or set(data) - set(PERMISSIONS):
            raise ValueError(f"a permission is {{{', '.join(PERMISSIONS)}}}, got {data!r}")
        return cls(**{p: data.get(p, "") for p in PERMISSIONS})


#: Everything, everywhere (the loopback default's guest; users given as a
#: plain ``{name: password}`` mapping).
FULL: Final = Permission()


@attrs.frozen
class User:
    name: str
    scram: sasl.ScramCredentials | None = None  # None: EXTERNAL (certificate) only
    permissions: Mapping[str, Permission] = attrs.field(factory=dict)
    #: Permissions on every vhost, whatever ``permissions`` says (loopback
    #: default and plain mappings: tests and demos).
    everywhere: Permission | None = None

    def permission(self, vhost: str) -> Permission | None:
        return self.everywhere or self.permissions.get(vhost)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: object, what: str) -> bytes:
    if not isinstance(text, str):
        raise ValueError(f"{what} must be base64 text")
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise ValueError(f"{what} is not base64") from None


def _scram_to_json(c: sasl.ScramCredentials) -> dict[str, Any]:
    return {"salt": _b64(c.salt), "iterations": c.iterations,
            "stored-key": _b64(c.stored_key), "server-key": _b64(c.server_key)}


def _scram_from_json(d: object) -> sasl.ScramCredentials:
    if not isinstance(d, dict):
        raise ValueError("scram-sha-256 must be an object")
    try:
        iterations = d.get("iterations")
        if type(iterations) is not int:
            raise ValueError("iterations must be an integer")
        return sasl.ScramCredentials(
            salt=_unb64(d.get("salt"), "salt"), iterations=iterations,
            stored_key=_unb64(d.get("stored-key"), "stored-key"),
            server_key=_unb64(d.get("server-key"), "server-key"))
    except LocalProtocolError as e:
        raise ValueError(str(e)) from None


# A fixed salt for the derivation done for unknown users, so that a PLAIN
# attempt costs the same whether or not the name exists.
_DUMMY = sasl.ScramCredentials(salt=b"amqp-sansio-none", iterations=DEFAULT_ITERATIONS,
                               stored_key=bytes(32), server_key=bytes(32))


class Users:
    """The users a broker knows and the vhosts it serves."""

    def __init__(self, users: Iterable[User] = (), vhosts: Iterable[str] = ("/",)) -> None:
        self.users: dict[str, User] = {u.name: u for u in users}
        self.vhosts: tuple[str, ...] = tuple(dict.fromkeys(vhosts))

    def __repr__(self) -> str:
        return f"<Users {len(self.users)} users, vhosts {list(self.vhosts)}>"

    # -- construction ----------------------------------------------------------
    @classmethod
    def from_passwords(cls, passwords: Mapping[str, str],
                       iterations: int = DEFAULT_ITERATIONS) -> Users:
        """Users with full permissions on every vhost (tests, demos)."""
        return cls(User(n, sasl.ScramCredentials.derive(p, iterations=iterations),
                        everywhere=FULL) for n, p in passwords.items())

    @classmethod
    def loopback_default(cls) -> Users:
        """guest/guest with full permissions (the broker admits it from
        loopback peers only)."""
        return cls.from_passwords(dict([GUEST]))

    def add(self, name: str, password: str | None, permissions: Mapping[str, Permission],
            iterations: int = DEFAULT_ITERATIONS) -> User:
        """Add or replace ``name``; ``password`` None: EXTERNAL only.  The
        vhosts named in ``permissions`` are added to the served ones."""
        if not name or any(ord(ch) < 0x20 for ch in name):
            raise ValueError("a user name must be non-empty, without control characters")
        scram = None
        if password is not None:
            if not password:
                raise ValueError("the password is empty")
            try:
                scram = sasl.ScramCredentials.derive(password, iterations=iterations)
            except LocalProtocolError as e:
                raise ValueError(str(e)) from None
        old = self.users.get(name)
        perms = dict(old.permissions) if old is not None else {}
        perms.update(permissions)
        user = self.users[name] = User(name, scram, perms)
        self.vhosts = tuple(dict.fromkeys((*self.vhosts, *permissions)))
        return user

    def remove(self, name: str) -> None:
        if self.users.pop(name, None) is None:
            raise KeyError(name)

    # -- what the broker asks ----------------------------------------------------
    def scram_lookup(self, name: str) -> sasl.ScramCredentials | None:
        u = self.users.get(name)
        return u.scram if u is not None else None

    def check_password(self, name: str, password: str) -> bool:
        """PLAIN: does ``password`` derive ``name``'s stored key?  (One
        PBKDF2 derivation whether or not the user exists.)"""
        found = self.scram_lookup(name)
        c = found or _DUMMY
        try:
            derived = sasl.ScramCredentials.derive(password, c.salt, c.iterations)
        except LocalProtocolError:  # not a valid stored string (SASLprep)
            return False
        return found is not None and hmac.compare_digest(derived.stored_key, c.stored_key)

    def permission(self, name: str, vhost: str) -> Permission | None:
        u = self.users.get(name)
        return u.permission(vhost) if u is not None else None

    # -- the file ---------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        users: dict[str, Any] = {}
        for u in self.users.values():
            if u.everywhere is not None:
                continue  # in-memory conveniences are not written out
            d: dict[str, Any] = {}
            if u.scram is not None:
                d["scram-sha-256"] = _scram_to_json(u.scram)
            d["permissions"] = {v: p.to_json() for v, p in u.permissions.items()}
            users[u.name] = d
        return {"format": FORMAT, "vhosts": list(self.vhosts), "users": users}

    @classmethod
    def from_json(cls, data: object) -> Users:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a users file (format {FORMAT!r} expected)")
        vhosts = data.get("vhosts", ["/"])
        raw = data.get("users", {})
        if not isinstance(vhosts, list) or not all(isinstance(v, str) for v in vhosts):
            raise ValueError("vhosts must be a list of names")
        if not isinstance(raw, dict):
            raise ValueError("users must be an object")
        users = []
        for name, d in raw.items():
            if not isinstance(d, dict):
                raise ValueError(f"user {name!r}: not an object")
            try:
                scram = _scram_from_json(d["scram-sha-256"]) if "scram-sha-256" in d else None
                perms = d.get("permissions", {})
                if not isinstance(perms, dict):
                    raise ValueError("permissions must be an object")
                users.append(User(name, scram, {v: Permission.from_json(p)
                                                for v, p in perms.items()}))
            except ValueError as e:
                raise ValueError(f"user {name!r}: {e}") from None
        return cls(users, vhosts)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Users:
        """Read a users file; ValueError (naming the file) if it is not one."""
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            return cls.from_json(data)
        except (ValueError, json.JSONDecodeError) as e:
            raise ValueError(f"{os.fspath(path)}: {e}") from None

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically, readable by the owner only (it holds hashes)."""
        target = Path(path)
        fd, tmp = tempfile.mkstemp(dir=target.parent or ".", prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.to_json(), f, indent=1, sort_keys=True)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

