"""What every case generator shares, whatever the protocol.  Pure.

A generator (:mod:`.generate_0_10` for AMQP 0-10, :mod:`.generate_0_9_1` for 0-9-1)
is a table of *operators* by *family*, each a function of a protocol
:class:`Script` that appends the items of one case and returns its
:class:`.case.Fault` (``None``: not applicable, try again).  The rest is
here, once:

* :class:`GenConfig` -- what the generated conversations assume about the
  target, and its saved form (a generator subclasses it, for its protocol
  tag and its default credentials);
* :class:`Script` -- the items, the barrier and the handshake order
  (header, ``start-ok``, ``tune-ok``, ``open``); a generator supplies the
  steps and everything else;
* :func:`make_case` -- the family and operator chosen from the case's own
  random source, the names tag, the retries;
* :func:`operator_names`, :func:`case_tag`, :func:`item_lines`,
  :func:`valid_fault`.
"""

from __future__ import annotations

__all__ = ["FAMILIES", "GenConfig", "Script", "Operators", "make_case", "operator_names",
           "case_tag", "item_lines", "valid_fault", "bad_headers"]

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

import attrs

from amqp_sansio import registry

from .case import P010, Case, Fault, Item
from .values import Names, Rng, case_rng


def bad_headers(*headers: bytes) -> list[bytes]:
    """The ``headers`` that open no protocol this library knows: a peer that
    speaks several (RabbitMQ; the embedded broker) may serve another
    protocol's header, which is conformant, not the refusal a bad-header
    case expects."""
    return [h for h in headers if registry.by_header(h) is None]


#: family -> weight: how often a case belongs to it (before ``--families``).
FAMILIES: dict[str, float] = {"valid": 30, "field": 25, "frame": 20, "state": 20,
                              "handshake": 5}


@attrs.frozen
class GenConfig:
    """What the generated conversations assume about the target.  The
    credentials default to none (ANONYMOUS); a protocol whose servers want a
    login overrides them."""

    PROTOCOL: ClassVar[str] = P010

    virtual_host: str = "/"
    mechanism: str = "ANONYMOUS"
    username: str | None = None
    password: str | None = None
    locale: str = "en_US"
    channel_max: int = 8  # what our tune-ok asks for: the channels cases use are below it
    frame_max: int = 4096  # what our tune-ok asks for: legal whatever the peer offers
    families: tuple[str, ...] = tuple(FAMILIES)
    operators: tuple[str, ...] = ()  # only these ("family:name"), when given
    # Added to every name a case uses (sessions, queues, exchanges), so that
    # runs against a long-lived target do not meet an earlier run's state.
    run_tag: str = ""

    @property
    def response(self) -> bytes:
        if self.mechanism == "PLAIN":
            return b"\0" + (self.username or "").encode() + b"\0" + (self.password or "").encode()
        return b""

    def to_json(self) -> dict[str, Any]:
        """The saved form (no password); ``protocol`` unless 0-10."""
        j: dict[str, Any] = {} if self.PROTOCOL == P010 else {"protocol": self.PROTOCOL}
        j.update({"virtual_host": self.virtual_host, "mechanism": self.mechanism,
                  "username": self.username, "locale": self.locale,
                  "channel_max": self.channel_max, "frame_max": self.frame_max,
                  "families": list(self.families), "operators": list(self.operators),
                  "run_tag": self.run_tag})
        return j


C = TypeVar("C", bound=GenConfig)


class Script(Generic[C]):
    """Builds the items of one case: the protocol-neutral half."""

    PROTOCOL: ClassVar[str] = P010
    PROTOCOL_HEADER: ClassVar[bytes]

    def __init__(self, cfg: C, rng: Rng, names: Names, tag: str) -> None:
        self.cfg = cfg
        self.rng = rng
        self.names = names
        self.tag = tag
        self.items: list[Item] = []
        self.barrier = "strict"

    def raw(self, label: str, data: bytes, wait: str | None = None,
            faulty: bool = False) -> None:
        self.items.append(Item(label, data, wait, faulty))

    # -- the handshake, in order ---------------------------------------------
    def header(self) -> None:
        self.raw("protocol header", self.PROTOCOL_HEADER, wait="start")

    def header_octets(self) -> None:
        """The protocol header, one octet per item."""
        for i, b in enumerate(self.PROTOCOL_HEADER):
            self.raw(f"protocol header octet {i}", bytes([b]), wait="start" if i == 7 else None)

    def start_ok(self, **over: Any) -> None:
        raise NotImplementedError

    def tune_ok(self) -> None:
        raise NotImplementedError

    def open(self) -> None:
        raise NotImplementedError

    def until_open(self) -> None:
        """The handshake up to (not including) ``connection.open``."""
        self.header()
        self.start_ok()
        self.tune_ok()

    def handshake(self) -> None:
        self.until_open()
        self.open()

    def finish(self, seed: int, number: int, family: str, fault: Fault) -> Case:
        return Case(seed=seed, number=number, family=family, fault=fault, items=self.items,
                    barrier=self.barrier, protocol=self.PROTOCOL)


S = TypeVar("S", bound=Script[Any])

#: family -> [(operator name, weight, function)]
Operators = Mapping[str, Sequence[tuple[str, float, Callable[[S], "Fault | None"]]]]


def valid_fault(target: str, detail: str = "") -> Fault:
    return Fault(kind="valid", target=target, detail=detail, accept=True)


def operator_names(operators: Operators[Any]) -> list[str]:
    return [f"{fam}:{name}" for fam, ops in operators.items() for name, _, _ in ops]


def case_tag(seed: int, number: int, run_tag: str = "") -> str:
    """What every name of the case carries: ``fz<seed>.<case>[.<run tag>]``."""
    return f"fz{seed}.{number}" + (f".{run_tag}" if run_tag else "")


def make_case(seed: int, number: int, cfg: C, *, operators: Operators[S],
              families: Mapping[str, float], script: Callable[[C, Rng, Names, str], S],
              salt: str = "") -> Case:
    """Case ``number`` of the campaign seeded ``seed`` -- deterministic: the
    operator is drawn (family weight x operator weight, among those ``cfg``
    selects) from ``case_rng(seed, number, salt + attempt)``, until one
    applies."""
    choices: list[tuple[tuple[str, str, Callable[[S], Fault | None]], float]] = []
    for fam, ops in operators.items():
        if fam not in cfg.families:
            continue
        total = sum(w for _, w, _ in ops)
        for name, w, fn in ops:
            if cfg.operators and f"{fam}:{name}" not in cfg.operators:
                continue
            choices.append(((fam, name, fn), families[fam] * w / total))
    if not choices:
        raise ValueError("no operator selected")
    for attempt in range(20):
        rng = case_rng(seed, number, f"{salt}{attempt}")
        fam, _name, fn = rng.weighted(choices)
        tag = case_tag(seed, number, cfg.run_tag)
        s = script(cfg, rng, Names(tag), tag)
        fault = fn(s)
        if fault is not None:
            return s.finish(seed, number, fam, fault)
    raise RuntimeError(f"case {number}: no applicable operator")  # pragma: no cover


def item_lines(case: Case) -> list[str]:
    """A case's items, one line each, for ``describe``."""
    lines = []
    for i, it in enumerate(case.items):
        mark = "!" if it.faulty else " "
        wait = f"  (wait {it.wait})" if it.wait else ""
        lines.append(f" {mark}{i:3d} {len(it.data):6d} octets  {it.label}{wait}")
    return lines
