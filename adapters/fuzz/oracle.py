"""The oracle: from what the peer did to one outcome per case.  Pure.

=============  ================================================================
outcome        meaning
=============  ================================================================
accepted       the peer went on normally (and the fault, if any, may be
               accepted)
rejected       a conformant rejection: ``connection.close``,
               ``session.detached`` or ``execution.exception`` with a code the
               spec allows for the fault (or for the command it names), or a
               dropped socket where the spec says to drop it
wrong-code     a rejection with a code the spec does not allow for that fault
missed         the peer accepted a fault the spec says it must reject
violation      the peer's own output broke a rule (see :mod:`.monitor_0_10`)
reset          the connection ended without a close where none was allowed
hang           no reply within the step deadline
crash          the port stopped accepting (a fresh probe connection failed)
deviation      not what the spec allows, but what the case (or the monitor)
               names as a *documented* deviation of a known implementation
               (e.g. RabbitMQ resetting the socket on an unknown method)
=============  ================================================================

The first four of the non-conformant outcomes are about *conformance*; the
last three about *robustness*.  Priority when several apply: crash,
violation, wrong-code, hang, reset, then the rest; a reaction the fault
lists in ``deviations`` (``"close:505"``, ``"reset"``, ``"hang"``,
``"accept"``, ...) turns wrong-code / reset / hang / missed into
``deviation``, never a crash or a violation.  ``deviation`` is neither
conformant nor counted as non-conformant (no reproducer minimisation, no
exit status 1 unless ``--fail-on`` names it).

The profile adds deviations of its own: a 0-10 class it says the peer
lacks (:attr:`.profiles.Profile.lacks`).  When the peer answers a command of
such a class with the code the profile names, that answer is allowed; when
the spec alone would not allow it there, or a reset follows, the case is
``deviation`` (``lacks-class:<class>``, with the profile's note): the peer
left the session there, so nothing after it says more about the fault.  A
case the spec alone finds conformant stays so (``rejected``); a crash, a
violation, a wrong code elsewhere or a hang stays what it is.
qpidd drops the socket so soon after that its queued answer is often lost
(the reset discards it): a reset with no answer at all is the same
deviation when the case sent a command of a lacking class before its fault
(or has none) and before any message.transfer -- named so ("no answer was
read").

The oracle is protocol-neutral: 0-9-1 signals are ``close`` (connection
scope, hard errors) and ``channel-close`` (soft errors, judged against
``Fault.channel_close`` and the codes the spec allows for the method the
close names); the codes allowed for a well-formed command or method come
from the protocol's spec info (:mod:`.specinfo_0_10`, :mod:`.specinfo_0_9_1`).
"""

from __future__ import annotations

__all__ = ["Observation", "Outcome", "classify", "OUTCOMES", "CONFORMANT", "NONCONFORMANT",
           "DOCUMENTED"]

from typing import Any

import attrs

from .case import FAMILY_091, P010, P091, P10, Case
from .feedback import ends_in_a_frame
from .profiles import XML, Lack, Profile
from .signals import Signal, Violation
from .specinfo_0_10 import GENERIC_ERROR_CODES, allowed_error_codes

OUTCOMES = ("accepted", "rejected", "deviation", "wrong-code", "missed", "violation", "reset",
            "hang", "crash")
CONFORMANT = frozenset({"accepted", "rejected"})
DOCUMENTED = frozenset({"deviation"})
NONCONFORMANT = frozenset(OUTCOMES) - CONFORMANT - DOCUMENTED
_ALWAYS_CLOSE = frozenset({320})  # connection-forced: an operator may always do it


@attrs.frozen
class Observation:
    """What happened on the connection, as the runner saw it."""

    signals: tuple[Signal, ...] = ()
    violations: tuple[Violation, ...] = ()
    eof: bool = False  # the transport ended (EOF or reset)
    clean_end: bool = False  # the close handshake completed
    timed_out: str | None = None  # the step whose deadline passed
    crashed: bool = False  # the probe after the case failed
    fault_sent: bool = False
    we_closed: bool = False
    unreachable: bool = False  # could not even connect
    opened: bool = False  # the handshake reached connection.open-ok
    deviations: tuple[Violation, ...] = ()  # documented deviations the monitor saw
    peer: tuple[tuple[str, str], ...] = ()  # what the peer said it is (start/open)
    states: tuple[str, ...] = ()  # the peer's response sequence (see .feedback.tokens)


@attrs.frozen
class Outcome:
    kind: str
    detail: str = ""

    @property
    def conformant(self) -> bool:
        return self.kind in CONFORMANT

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "detail": self.detail}


def _allowed(command: str, protocol: str = "0-10", profile: Profile = XML) -> frozenset[int]:
    if protocol in FAMILY_091:
        from .specinfo_0_9_1 import allowed_codes

        return allowed_codes(command) | profile.extra_codes(command)
    codes: frozenset[int] = frozenset()
    for name in command.split("|"):  # an id the conversation used twice
        codes |= allowed_error_codes(name) | profile.extra_codes(name)
    return codes


def _exception_codes(case: Case, s: Signal, profile: Profile = XML) -> frozenset[int]:
    f = case.fault
    if s.command is not None and not s.faulty:
        codes = _allowed(s.command, profile=profile)
        if s.after_fault and not f.valid:
            # Commands after a fault may fail because of it (the fault's
            # codes), e.g. a session whose state the fault changed.
            codes = codes | f.exception
        return codes
    if s.after_fault and not f.valid:
        return f.exception | (_allowed(s.command, profile=profile) if s.command and f.accept
                               else frozenset())
    return GENERIC_ERROR_CODES


def _method_codes(case: Case, s: Signal, fault_codes: frozenset[int],
                  profile: Profile = XML) -> frozenset[int]:
    """0-9-1: the codes a close naming ``s.command`` may carry."""
    f = case.fault
    codes: frozenset[int] = frozenset()
    if s.command is not None and (not s.faulty or f.accept):
        codes = _allowed(s.command, P091, profile)
    if s.after_fault and not f.valid:
        codes = codes | fault_codes
    return codes


def judge(case: Case, s: Signal, rejected_channels: set[int], we_closed: bool,
          profile: Profile = XML) -> tuple[bool, bool, str]:
    """(is it a rejection, is it allowed, why)."""
    f = case.fault
    if case.protocol == P10 and s.kind in ("close", "end", "detach", "sasl"):
        return _judge_1_0(case, s, we_closed)
    p091 = case.protocol in FAMILY_091
    if s.kind == "close":
        code = s.code or 0
        if code == 200:
            return False, we_closed, "connection.close(200) unprompted"
        allowed = _ALWAYS_CLOSE | (f.close if s.after_fault and not f.valid else frozenset())
        if p091:
            allowed |= _method_codes(case, s, f.close, profile)
        what = f" naming {s.command}" if p091 and s.command else ""
        return True, code in allowed, f"connection.close({code}){what}"
    if s.kind == "channel-close":
        code = s.code or 0
        if code == 200:
            return False, True, f"channel.close(200) on channel {s.channel}"
        allowed = _method_codes(case, s, f.channel_close, profile)
        what = f" naming {s.command}" if s.command else ""
        return True, code in allowed, f"channel.close({code}) on channel {s.channel}{what}"
    if s.kind == "detached":
        dcode = s.code
        if dcode == 0:
            return False, True, "detached(normal)"
        ch = s.channel if s.channel is not None else -1
        if dcode == 3 and ch in rejected_channels:
            return True, True, "detached(not-attached) after the session ended"
        ok = dcode in f.detach if (s.after_fault and not f.valid) else False
        return True, ok, f"session.detached(code {dcode}) on channel {s.channel}"
    if s.kind == "exception":
        what = s.command or "a command"
        return (True, s.code in _exception_codes(case, s, profile),
                f"execution.exception({s.code}) for {what}")
    if s.kind == "redirect":
        return True, True, f"redirect to {s.text}"
    return False, True, s.kind


def _judge_1_0(case: Case, s: Signal, we_closed: bool) -> tuple[bool, bool, str]:
    """1.0: a close / end / detach is a rejection when it carries an error;
    its condition must be one the fault (or any case) allows."""
    from .specinfo_1_0 import SASL_SYS, allowed_conditions

    f = case.fault
    faulted = s.after_fault and not f.valid
    if s.kind == "sasl":
        code = s.code or 0
        allowed = SASL_SYS | (f.close if faulted else frozenset())
        return code != 0, code == 0 or code in allowed, f"sasl-outcome({code})"
    if not s.text:
        if s.kind == "close" and not we_closed:
            # A close without an error, unprompted: no more than a drop.
            return True, faulted and f.drop, "close without an error, unprompted"
        return False, True, f"{s.kind} without an error"
    conditions = allowed_conditions(s.kind) | (f.conditions if faulted else frozenset())
    where = f" of {s.command}" if s.command else ""
    return True, s.text in conditions, f"{s.kind}({s.text}){where}"


def _lacking_sent(case: Case, profile: Profile) -> tuple[str, Lack] | None:
    """The first command of a class ``profile`` lacks that ``case`` sends
    before its fault and before any message.transfer (whose header structs
    may be what the peer could not read: qpidd drops a connection on one it
    does not know, e.g. fragment-properties).  0-10 items are labelled
    ``cmd <class>.<command> ...``."""
    if case.protocol != P010 or not profile.lacks:
        return None
    for item in case.items:
        if item.faulty:
            return None
        word = item.label.split()
        if len(word) > 1 and word[0] == "cmd":
            if word[1] == "message.transfer":
                return None
            lack = profile.lacks.get(word[1].split(".", 1)[0])
            if lack is not None:
                return word[1], lack
    return None


def classify(case: Case, obs: Observation, profile: Profile = XML) -> Outcome:
    """The outcome of ``case`` from what was observed, judged by the spec and
    ``profile`` (what the peer's implementation documents)."""
    f = case.fault
    devs = dict(f.deviations)
    deviated: list[str] = []

    def deviation(tag: str) -> Outcome | None:
        note = devs.get(tag)
        return Outcome("deviation", f"{tag}: {note}") if note is not None else None

    if obs.crashed:
        return Outcome("crash", "the port stopped accepting connections"
                       + (f" ({obs.timed_out})" if obs.timed_out else ""))
    if obs.unreachable:
        return Outcome("crash", "could not connect to the target")
    violations = obs.violations
    if case.family == "feedback":
        # A mutant breaks the bookkeeping the monitor's own rules assume: it is
        # judged by what our core rejects (framing, decoding, the handshake).
        violations = tuple(v for v in violations if v.rule.startswith(("core.", "frames.")))
    if violations:
        v = violations[0]
        more = f" (+{len(violations) - 1} more)" if len(violations) > 1 else ""
        return Outcome("violation", f"{v.rule}: {v.message}{more}")
    rejected = False
    rejected_channels: set[int] = set()
    first_reason = ""
    lacked = ""  # the profile's lacks-class deviation, once the peer showed it
    excused = False  # ... and the code the spec alone would not allow there
    for s in obs.signals:
        is_rej, ok, why = judge(case, s, rejected_channels, obs.we_closed, profile)
        lack = (profile.lack(s.command, s.code)
                if case.protocol == P010 and s.kind == "exception" else None)
        if lack is not None:
            lacked = lacked or f"lacks-class:{lack.cls}: {lack.note} ({why})"
            excused = excused or not ok
            ok = True
        if not ok and (s.after_fault or f.valid) and f"{s.kind}:{s.code}" in devs:
            tag = f"{s.kind}:{s.code}"
            deviated.append(f"{tag}: {devs[tag]} ({why})")
            ok = True
        if not ok and case.protocol == P10:
            return Outcome("wrong-code", f"{why}; allowed for {f.kind}: "
                           f"{sorted(f.conditions) if s.after_fault else '(before the fault)'}")
        if not ok:
            return Outcome("wrong-code", f"{why}; allowed for {f.kind}: close {sorted(f.close)}"
                           f" detach {sorted(f.detach)} exception "
                           f"{sorted(_exception_codes(case, s, profile)) if s.kind == 'exception' else '-'}")
        if s.kind in ("detached", "exception", "detach") and s.channel is not None:
            rejected_channels.add(s.channel)
        if is_rej:
            if not rejected:
                first_reason = why
            rejected = True
    closed_by_peer = any(s.kind == "close" for s in obs.signals)
    reset = obs.eof and not obs.clean_end and not closed_by_peer
    if lacked and not obs.timed_out and (excused or reset):
        ended = ", then the connection ended without connection.close" if reset else ""
        return Outcome("deviation", lacked + ended)
    if obs.timed_out:
        if case.family == "feedback" and ends_in_a_frame(case):
            return Outcome("accepted", "the peer waits for the rest of a frame the mutant cut "
                           f"short (what we sent next is inside it): {obs.timed_out}")
        return ((obs.fault_sent or f.valid) and deviation("hang")) or Outcome(
            "hang", f"no reply within the deadline: {obs.timed_out}")
    if reset:
        if obs.fault_sent and f.drop:
            return Outcome("rejected", "dropped the connection (allowed for this fault)")
        sent = _lacking_sent(case, profile) if not obs.signals else None
        if sent is not None:
            return Outcome("deviation", f"lacks-class:{sent[1].cls}: {sent[1].note} (sent "
                           f"{sent[0]}; the connection ended before an answer was read)")
        return ((obs.fault_sent or f.valid) and deviation("reset")) or Outcome(
            "reset", "the connection ended without connection.close")
    if not rejected and not f.valid and not f.accept and obs.fault_sent:
        return deviation("accept") or Outcome("missed", f"accepted {f.kind}: {f.detail}")
    if deviated:
        return Outcome("deviation", deviated[0])
    if obs.deviations:
        d = obs.deviations[0]
        return Outcome("deviation", f"{d.rule}: {d.message}")
    if rejected:
        return Outcome("rejected", first_reason)
    return Outcome("accepted", "")
