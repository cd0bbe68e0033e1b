"""Message selectors for 1.0 links (``apache.org:selector-filter:string``): a
subset of the JMS / SQL-92 conditional grammar, over a message's
application properties and a few of its properties.

Supported: identifiers, string / integer / decimal / boolean literals,
``= <> < > <= >=``, ``+ - * /``, ``AND OR NOT``, ``IS [NOT] NULL``,
``[NOT] LIKE 'pat' [ESCAPE 'c']``, ``[NOT] IN ('a', ...)``,
``[NOT] BETWEEN a AND b``, parentheses; three-valued logic (an unknown
identifier is NULL, and a message matches only when the whole expression is
TRUE).  Identifiers name application properties, except the JMS header names
``JMSMessageID JMSCorrelationID JMSPriority JMSDeliveryMode JMSTimestamp
JMSType``, which read the message's id, correlation id, priority,
persistence ('PERSISTENT' / 'NON_PERSISTENT'), creation time (ms) and
subject.  A selector is at most :data:`MAX_LENGTH` characters and its
expression at most :data:`MAX_DEPTH` deep -- chains of operators count, so
neither parsing nor evaluating recurses deeper than that -- and ``LIKE``
matches in time linear in the value (no backtracking regex): what a peer
writes bounds its cost.  A selector never raises into the broker: whatever
goes wrong while one judges a message, the message is not selected.
"""

from __future__ import annotations

__all__ = ["SelectorError", "compile_selector", "MAX_LENGTH", "MAX_DEPTH"]

import logging
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from amqp_sansio.message import Message

if TYPE_CHECKING:
    from .queued import QMsg

MAX_LENGTH = 2048
MAX_DEPTH = 64

Value = Any
Lookup = Callable[[str], Value]
Expr = Callable[[Lookup], Value]

log = logging.getLogger("amqp_sansio.broker")

_TOKEN = re.compile(r"""\s*(?:
    (?P<str>'(?:[^']|'')*')
  | (?P<num>\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)
  | (?P<op><>|<=|>=|[=<>+\-*/(),])
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$.\-]*)
)""", re.VERBOSE)
_KEYWORDS = {"AND", "OR", "NOT", "IS", "NULL", "LIKE", "ESCAPE", "IN", "BETWEEN", "TRUE",
             "FALSE"}


class SelectorError(ValueError):
    """A selector this broker cannot apply."""


def _tokens(text: str) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise SelectorError(f"unexpected text at {pos}: {text[pos:pos + 10]!r}")
        pos = m.end()
        if m.group("str") is not None:
            out.append(("lit", m.group("str")[1:-1].replace("''", "'")))
        elif m.group("num") is not None:
            n = m.group("num")
            out.append(("lit", float(n) if any(c in n for c in ".eE") else int(n)))
        elif m.group("op") is not None:
            out.append(("op", m.group("op")))
        else:
            word = m.group("id")
            up = word.upper()
            if up in ("TRUE", "FALSE"):
                out.append(("lit", up == "TRUE"))
            elif up in _KEYWORDS:
                out.append(("kw", up))
            else:
                out.append(("id", word))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        if len(text) > MAX_LENGTH:
            raise SelectorError(f"a selector holds at most {MAX_LENGTH} characters")
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0

    def peek(self) -> tuple[str, Any] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, kind: str, value: Any = None) -> bool:
        t = self.peek()
        if t is not None and t[0] == kind and (value is None or t[1] == value):
            self.i += 1
            return True
        return False

    def need(self, kind: str, value: Any = None) -> Any:
        t = self.peek()
        if t is None or t[0] != kind or (value is not None and t[1] != value):
            raise SelectorError(f"expected {value or kind}, found {t[1] if t else 'the end'!r}")
        self.i += 1
        return t[1]

    def parse(self) -> Expr:
        e = self.orexpr()
        if self.peek() is not None:
            raise SelectorError(f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return e

    def _nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise SelectorError(f"a selector nests at most {MAX_DEPTH} deep")

    def orexpr(self) -> Expr:
        self._nest()
        e = self.andexpr()
        while self.take("kw", "OR"):
            e = _junction(e, self.andexpr(), True)
        self.depth -= 1
        return e

    def andexpr(self) -> Expr:
        e = self.notexpr()
        while self.take("kw", "AND"):
            e = _junction(e, self.notexpr(), False)
        return e

    def notexpr(self) -> Expr:
        if self.take("kw", "NOT"):
            self._nest()
            inner = self.notexpr()
            self.depth -= 1
            return _negate(inner, True)
        return self.comparison()

    def comparison(self) -> Expr:
        left = self.sum()
        t = self.peek()
        if t is None:
            return left
        if t[0] == "op" and t[1] in _CMP:
            self.i += 1
            return _cmp(_CMP[t[1]], left, self.sum())
        if self.take("kw", "IS"):
            neg = self.take("kw", "NOT")
            self.need("kw", "NULL")
            return _deep(lambda get: (left(get) is None) != neg, left)
        neg = self.take("kw", "NOT")
        if self.take("kw", "LIKE"):
            pat = self.need("lit")
            esc = self.need("lit") if self.take("kw", "ESCAPE") else None
            return _negate(_like(left, str(pat), esc), neg)
        if self.take("kw", "IN"):
            self.need("op", "(")
            items = [self.need("lit")]
            while self.take("op", ","):
                items.append(self.need("lit"))
            self.need("op", ")")
            return _negate(_deep(lambda get: None if (v := left(get)) is None else v in items,
                                 left), neg)
        if self.take("kw", "BETWEEN"):
            lo = self.sum()
            self.need("kw", "AND")
            hi = self.sum()
            return _negate(_junction(_cmp(_CMP[">="], left, lo), _cmp(_CMP["<="], left, hi),
                                     False), neg)
        if neg:
            raise SelectorError("NOT here needs LIKE, IN or BETWEEN")
        return left

    def sum(self) -> Expr:
        e = self.product()
        while (t := self.peek()) is not None and t[0] == "op" and t[1] in "+-":
            self.i += 1
            e = _arith(t[1], e, self.product())
        return e

    def product(self) -> Expr:
        e = self.unary()
        while (t := self.peek()) is not None and t[0] == "op" and t[1] in "*/":
            self.i += 1
            e = _arith(t[1], e, self.unary())
        return e

    def unary(self) -> Expr:
        if self.take("op", "-"):
            self._nest()
            inner = self.unary()
            self.depth -= 1
            return _arith("-", _deep(lambda get: 0), inner)
        if self.take("op", "+"):
            self._nest()  # (a run of unary + nests as deep as its length)
            inner = self.unary()
            self.depth -= 1
            return inner
        return self.primary()

    def primary(self) -> Expr:
        t = self.peek()
        if t is None:
            raise SelectorError("the selector ends too soon")
        self.i += 1
        if t[0] == "lit":
            v = t[1]
            return _deep(lambda get: v)
        if t[0] == "id":
            name = t[1]
            return _deep(lambda get: get(name))
        if t == ("op", "("):
            e = self.orexpr()
            self.need("op", ")")
            return e
        raise SelectorError(f"unexpected {t[1]!r}")


def _deep(f: Expr, *children: Expr) -> Expr:
    """``f`` is a node over ``children``: its depth is theirs plus one, at
    most MAX_DEPTH (evaluation recurses that deep, no deeper)."""
    depth = 1 + max((getattr(c, "depth", 1) for c in children), default=0)
    if depth > MAX_DEPTH:
        raise SelectorError(f"a selector's expression is at most {MAX_DEPTH} deep")
    f.depth = depth  # type: ignore[attr-defined]
    return f


def _num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _cmp(op: Callable[[Any, Any], bool], a: Expr, b: Expr) -> Expr:
    def f(get: Lookup) -> Value:
        x, y = a(get), b(get)
        if x is None or y is None:
            return None
        if _num(x) != _num(y) or (type(x) is bool) != (type(y) is bool):
            return False if op is _CMP["="] else True if op is _CMP["<>"] else None
        try:
            return op(x, y)
        except TypeError:
            return None
    return _deep(f, a, b)


_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda x, y: bool(x == y), "<>": lambda x, y: bool(x != y),
    "<": lambda x, y: bool(x < y), ">": lambda x, y: bool(x > y),
    "<=": lambda x, y: bool(x <= y), ">=": lambda x, y: bool(x >= y)}


def _arith(op: str, a: Expr, b: Expr) -> Expr:
    def f(get: Lookup) -> Value:
        x, y = a(get), b(get)
        if not (_num(x) and _num(y)):
            return None
        if op == "+":
            return x + y
        if op == "-":
            return x - y
        if op == "*":
            return x * y
        return None if y == 0 else x / y
    return _deep(f, a, b)


def _junction(a: Expr, b: Expr, decisive: bool) -> Expr:
    """AND (``decisive`` False) or OR (True), three-valued: NULL unless one
    side decides it."""
    def f(get: Lookup) -> Value:
        x = a(get)
        if x is decisive:
            return decisive
        y = b(get)
        if y is decisive:
            return decisive
        return None if x is None or y is None else not decisive
    return _deep(f, a, b)


def _negate(e: Expr, neg: bool) -> Expr:
    if not neg:
        return e
    return _deep(lambda get: None if (v := e(get)) is None else not v, e)


def _like(e: Expr, pattern: str, escape: str | None) -> Expr:
    if escape is not None and len(escape) != 1:
        raise SelectorError("ESCAPE takes one character")
    match = like_matcher(pattern, escape)

    def f(get: Lookup) -> Value:
        v = e(get)
        if v is None:
            return None
        return isinstance(v, str) and match(v)
    return _deep(f, e)


def like_matcher(pattern: str, escape: str | None = None) -> Callable[[str], bool]:
    """``value LIKE pattern`` (``%`` any run, ``_`` any one character) in
    time linear in the value: the pattern is split at its ``%`` into
    pieces of fixed length (``_`` a wildcard inside them); the first must
    start the value, the last end it, and each one between is found at its
    earliest place after the one before (the earliest is never worse).  No
    backtracking, so no pattern makes a value cost more than one pass per
    piece."""
    pieces: list[list[str | None]] = [[]]  # None: `_`
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if escape is not None and c == escape and i + 1 < len(pattern):
            pieces[-1].append(pattern[i + 1])
            i += 2
            continue
        if c == "%":
            pieces.append([])
        else:
            pieces[-1].append(None if c == "_" else c)
        i += 1
    # each piece as a regex of fixed length (literals and `.`): its search
    # is linear in the value
    rx = [re.compile("".join("." if ch is None else re.escape(ch) for ch in p), re.DOTALL)
          for p in pieces]
    sizes = [len(p) for p in pieces]
    if len(pieces) == 1:
        only = rx[0]
        return lambda v: only.fullmatch(v) is not None
    first, last = rx[0], rx[-1]
    middle = list(zip(rx[1:-1], sizes[1:-1], strict=True))
    head, tail = sizes[0], sizes[-1]

    def match(v: str) -> bool:
        if len(v) < head + tail or first.match(v) is None:
            return False
        pos = head
        end = len(v) - tail
        for piece, size in middle:
            if not size:
                continue
            m = piece.search(v, pos, end)
            if m is None:
                return False
            pos = m.start() + size
        return pos <= end and last.fullmatch(v, end) is not None

    return match


def _jms(props: Message, name: str, subject: str | None) -> Any:
    if name == "JMSMessageID":
        return None if props.message_id is None else str(props.message_id)
    if name == "JMSCorrelationID":
        c = props.correlation_id
        return (None if c is None else c.decode("utf-8", "replace") if isinstance(c, bytes)
                else str(c))
    if name == "JMSPriority":
        return 4 if props.priority is None else props.priority
    if name == "JMSDeliveryMode":
        return "PERSISTENT" if props.persistent else "NON_PERSISTENT"
    if name == "JMSTimestamp":
        return None if props.timestamp is None else props.timestamp * 1000
    if name == "JMSType":
        return subject
    return None


def compile_selector(text: str) -> Callable[[QMsg], bool]:
    """A predicate on queued messages; SelectorError if ``text`` is not a
    selector this broker applies."""
    expr = _Parser(text).parse()

    def matches(msg: QMsg) -> bool:
        wire = msg.wire
        headers = wire.headers or {}

        def get(name: str) -> Any:
            if name.startswith("JMS"):
                secs = wire.value if wire.form == "1.0" else None
                props = getattr(secs, "properties", None)
                subject = props.subject if props is not None else msg.routing_key
                return _jms(wire.props, name, subject)
            return headers.get(name)

        try:
            return expr(get) is True
        except Exception as err:  # its own consumer's business: never the publisher's
            log.debug("selector %r on message %d: %s", text[:64], msg.seq, err)
            return False

    return matches
