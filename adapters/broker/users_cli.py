"""``amqp-sansio broker users ...``: manage a users file (see ``users.py``).

::

    amqp-sansio broker users add NAME --vhost / [--configure RE --write RE --read RE]
    amqp-sansio broker users add NAME --vhost / --no-password   # EXTERNAL (certificate) only
    amqp-sansio broker users delete NAME
    amqp-sansio broker users list

The file is ``--users FILE`` (or ``$AMQP_SANSIO_BROKER_USERS``).  A password
is read from the terminal (asked twice) or, when stdin is not a terminal,
from its first line -- never from the command line, where ``ps`` shows it.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable
from pathlib import Path

from .users import DEFAULT_ITERATIONS, USERS_ENV, Permission, Users


def _parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"{prog} users",
                                description="Manage the broker's users file.")
    p.add_argument("--users", metavar="FILE", default=os.environ.get(USERS_ENV),
                   help=f"the users file (default ${USERS_ENV})")
    sub = p.add_subparsers(dest="action", required=True)
    add = sub.add_parser("add", help="add a user, or replace its password and permissions "
                                     "on the vhosts named")
    add.add_argument("name", help="the user's name")
    add.add_argument("--vhost", action="append", default=[], metavar="NAME",
                     help="grant the permissions below on this vhost (repeatable; "
                          "default '/'); the file serves every vhost it names")
    add.add_argument("--configure", default=".*", metavar="REGEX",
                     help="names it may declare and delete (default %(default)s)")
    add.add_argument("--write", default=".*", metavar="REGEX",
                     help="exchanges it may publish to, queues it may bind "
                          "(default %(default)s)")
    add.add_argument("--read", default=".*", metavar="REGEX",
                     help="queues it may consume from or purge, exchanges it may bind "
                          "from (default %(default)s)")
    add.add_argument("--no-password", action="store_true",
                     help="no password: logs in with EXTERNAL (a TLS client certificate "
                          "whose common name is NAME) only")
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                     help="PBKDF2 iterations of the stored SCRAM-SHA-256 credentials "
                          "(default %(default)s)")
    delete = sub.add_parser("delete", help="remove a user")
    delete.add_argument("name", help="the user's name")
    sub.add_parser("list", help="users and their permissions per vhost")
    return p


def read_password(name: str, prompt: Callable[[str], str] = getpass.getpass) -> str:
    """From the terminal (twice, must match), else stdin's first line."""
    if sys.stdin.isatty():
        first = prompt(f"password for {name}: ")
        if prompt("again: ") != first:
            raise ValueError("the passwords differ")
        return first
    return sys.stdin.readline().rstrip("\r\n")


def main(argv: list[str], prog: str) -> int:
    args = _parser(prog).parse_args(argv)
    if not args.users:
        print(f"{prog} users: error: name the users file with --users FILE or ${USERS_ENV}",
              file=sys.stderr)
        return 2
    path = Path(args.users)
    try:
        users = Users.load(path) if path.exists() else Users(vhosts=())
        if args.action == "add":
            password = None if args.no_password else read_password(args.name)
            perm = Permission(args.configure, args.write, args.read)
            users.add(args.name, password, {v: perm for v in args.vhost or ["/"]},
                      iterations=args.iterations)
            users.save(path)
            print(f"{args.name}: saved in {path}")
        elif args.action == "delete":
            try:
                users.remove(args.name)
            except KeyError:
                print(f"{prog} users: error: no user {args.name!r} in {path}", file=sys.stderr)
                return 1
            users.save(path)
        else:
            print(f"vhosts: {' '.join(users.vhosts) or '(none)'}")
            for u in users.users.values():
                how = "password" if u.scram is not None else "certificate only"
                print(f"{u.name} ({how})")
                for vhost, p in u.permissions.items():
                    print(f"  {vhost}: configure {p.configure!r} write {p.write!r} "
                          f"read {p.read!r}")
    except (OSError, ValueError) as e:
        print(f"{prog} users: error: {e}", file=sys.stderr)
        return 1
    return 0
