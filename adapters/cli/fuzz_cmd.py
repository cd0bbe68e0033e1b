"""Fuzz an AMQP 0-10, 0-9-1, 0-9 or 1.0 peer (a broker, or 0-10 / 1.0 clients with --role server).

    amqp-sansio fuzz --target 127.0.0.1:5672 --cases 10000 --seed 7 [--budget 10m] [--out DIR]
    amqp-sansio fuzz --protocol 0-9-1 --target 127.0.0.1:5672 ...   a 0-9-1 broker (RabbitMQ)
    amqp-sansio fuzz --protocol 0-9 --target 127.0.0.1:5672 ...     a 0-9 broker (the 0-9-1
                                                                     operators, 0-9's table)
    amqp-sansio fuzz --protocol 1.0 --target 127.0.0.1:5672 ...     a 1.0 peer (rhea, proton,
                                          RabbitMQ's plugin: --address-prefix /queue/)
    amqp-sansio fuzz --target embedded ...        the embedded broker (any --protocol), supervised
    amqp-sansio fuzz --target-command 'CMD ... {port}' ...   start the peer on a free loopback
                                          port, watch it: crashes and hangs get a signature,
                                          are confirmed, minimised, and the peer restarted
    amqp-sansio fuzz --target HOST:PORT --target-pid PID [--target-log FILE] ...
                                          watch a peer someone else started
    amqp-sansio fuzz --spark ...                  case ranges on Spark executors
    amqp-sansio fuzz --role server --listen 127.0.0.1:5673 ...   fuzz connecting 0-10 clients
    amqp-sansio fuzz --protocol 1.0 --role server --client-command 'python c.py {port}' ...
                                          fuzz a 1.0 client: the command runs once a case
    amqp-sansio fuzz replay FILE [--target HOST:PORT | --target-command 'CMD {port}']
    amqp-sansio fuzz show [--protocol 0-9-1] --seed 7 --case 42      print one case
    amqp-sansio fuzz operators [--protocol 0-9-1]                    list the generators

Every case is a pure function of (seed, case number) (plus the name tag in
the reproducer), so any case can be rebuilt and replayed.  Non-conformant
outcomes are minimised and saved under ``DIR/reproducers``; the exit status
is 1 when there were any (see ``--fail-on``).  ``DIR/findings.md`` is the
report: crashes grouped by signature, then the other findings.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import time
from pathlib import Path
from typing import Any

from amqp_sansio_fuzz.case import FAMILY_091, PROTOCOLS

from .extras import require
from .streams import CLIError, Streams, Subcommands

_OUTCOMES = ("accepted", "rejected", "deviation", "wrong-code", "missed", "violation", "reset",
             "hang", "crash")
_PROTOCOLS = PROTOCOLS  # the registry's protocols the fuzzer has a generator for


def duration_arg(s: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", s)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {s!r} (e.g. 90s, 10m, 1h)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _protocol_arg(p: argparse.ArgumentParser, what: str = "0-10",
                  default: Any = None) -> None:
    # One dest for 'fuzz --protocol X show' and 'fuzz show --protocol X':
    # the actions' option must not overwrite the parent's with a default.
    p.add_argument("--protocol", choices=_PROTOCOLS, default=default,
                   help=f"AMQP version of the peer (default: {what})")


def _protocol(args: Any) -> str:
    return getattr(args, "protocol", None) or "0-10"


def _supervision(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target-command", default=None, metavar="COMMAND",
                   help="start the peer with COMMAND ('{port}' is replaced with a free "
                        "loopback port; split like a shell does) and supervise it: exit "
                        "status, signal, output, sanitizer reports, core dumps; restarted "
                        "after each crash.  --role server: the client command")
    p.add_argument("--target-pid", type=int, default=None, metavar="PID",
                   help="supervise the peer at --target that someone else started (its "
                        "death ends the campaign)")
    p.add_argument("--target-log", type=Path, default=None, metavar="FILE",
                   help="with --target-pid: the file the peer's output goes to")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--step-timeout", type=float, default=2.0, metavar="SECONDS",
                   help="deadline for each awaited reply (default %(default)s)")
    p.add_argument("--per-case-deadline", dest="case_timeout", type=float, default=30.0,
                   metavar="SECONDS",
                   help="deadline for a whole case: past it the peer hangs (default "
                        "%(default)s)")
    p.add_argument("--vhost", default="/", help="virtual host to open (default %(default)s)")
    p.add_argument("--user", default=None,
                   help="authenticate with PLAIN as this user (0-10 default: ANONYMOUS; "
                        "0-9-1 default: guest)")
    p.add_argument("--password", default=None,
                   help="the --user's password (0-9-1 default with no --user: guest)")


def register(sub: Subcommands) -> None:
    p = sub.add_parser("fuzz", help="fuzz an AMQP 0-10, 0-9-1, 0-9 or 1.0 broker (or 0-10 or 1.0 clients)",
                       description=__doc__.split("\n\n")[0] if __doc__ else None,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=__doc__.split("\n\n", 1)[1] if __doc__ else None)
    _protocol_arg(p)
    p.add_argument("--target", default=None, metavar="HOST:PORT",
                   help="the peer to fuzz, or 'embedded' (the embedded broker)")
    _supervision(p)
    p.add_argument("--cases", type=int, default=1000, help="number of cases (default %(default)s)")
    p.add_argument("--seed", type=int, default=0,
                   help="cases are a pure function of (seed, case number) (default %(default)s)")
    p.add_argument("--start", type=int, default=0, help="first case number (default 0)")
    p.add_argument("--budget", type=duration_arg, default=None, metavar="DURATION",
                   help="stop after this long (90s, 10m, 1h)")
    p.add_argument("--out", type=Path, default=Path("amqp-fuzz-out"),
                   help="results, summary and reproducers go here (default %(default)s)")
    p.add_argument("--families", default=None,
                   help="comma-separated subset of valid,field,frame,state,handshake")
    p.add_argument("--operators", default=None,
                   help="comma-separated family:operator names (see 'fuzz operators')")
    p.add_argument("--tag", default=None,
                   help="name tag for this run's queues/sessions (default: from the clock)")
    p.add_argument("--channel-max", type=int, default=8,
                   help="channel-max our tune-ok asks for (default %(default)s)")
    p.add_argument("--address-prefix", default="",
                   help="1.0: put before every address a case names (RabbitMQ's plugin: "
                        "/queue/; default: none, addresses as the case names them)")
    p.add_argument("--profile", default="auto",
                   help="the oracle's peer profile: auto (from the peer's connection.start / "
                        "open: amqp-sansio, qpidd, rabbitmq, else xml), xml, qpidd, rabbitmq "
                        "or amqp-sansio (default %(default)s)")
    p.add_argument("--feedback", action="store_true",
                   help="state feedback: cases that reach new peer states become seeds, and "
                        "part of the --cases budget goes to their mutants")
    p.add_argument("--mutant-share", type=float, default=0.5, metavar="FRACTION",
                   help="--feedback: the share of the budget for mutants (default %(default)s)")
    p.add_argument("--no-minimise", action="store_true", help="save reproducers unminimised")
    p.add_argument("--fail-on", default="all",
                   help="outcomes that make the exit status 1: 'all' non-conformant "
                        "(default), 'none', or a comma-separated list")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.add_argument("--spark", action="store_true",
                   help="distribute case ranges over Spark executors (results as Parquet)")
    p.add_argument("--spark-master", default="local[2]",
                   help="--spark: the Spark master URL (default %(default)s)")
    p.add_argument("--partitions", type=int, default=None,
                   help="case ranges for --spark (default: 4 per core of the master)")
    p.add_argument("--role", choices=("client", "server"), default="client",
                   help="'client' (default): connect to --target; 'server': listen and fuzz "
                        "the (0-10 or 1.0) clients that connect")
    p.add_argument("--listen", default="127.0.0.1:5673", metavar="HOST:PORT",
                   help="--role server: where to listen (default %(default)s)")
    p.add_argument("--client-command", default=None, metavar="COMMAND",
                   help="--role server: a client command run for each case ({port} is "
                        "replaced with the port listened on; split like a shell does); "
                        "without it, each connection that comes is a case")
    _common(p)
    p.set_defaults(func=run_fuzz)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    r = actions.add_parser("replay", help="replay one reproducer")
    r.add_argument("file", type=Path, help="a reproducer (DIR/reproducers/*.json)")
    _protocol_arg(r, "the reproducer's", argparse.SUPPRESS)
    r.add_argument("--target", default=None, metavar="HOST:PORT",
                   help="default: the target recorded in the file ('embedded' works)")
    _supervision(r)
    r.add_argument("--listen", default="127.0.0.1:5673", metavar="HOST:PORT",
                   help="server-role reproducers: where to wait for the client "
                        "(default %(default)s)")
    r.add_argument("--fresh", action="store_true",
                   help="rebuild the case from seed + case number with a new name tag "
                        "instead of sending the recorded octets")
    _common(r)
    r.set_defaults(func=run_replay)
    s = actions.add_parser("show", help="print one case")
    _protocol_arg(s, default=argparse.SUPPRESS)
    s.add_argument("--seed", type=int, default=0, help="the campaign's seed (default 0)")
    s.add_argument("--case", type=int, required=True, help="the case number")
    s.add_argument("--hex", action="store_true", help="also print the octets")
    s.set_defaults(func=run_show)
    o = actions.add_parser("operators", help="list the generators")
    _protocol_arg(o, default=argparse.SUPPRESS)
    o.set_defaults(func=run_operators)


def _out(streams: Streams, text: str) -> None:
    streams.stdout.write((text + "\n").encode())
    streams.stdout.flush()


def _gen_config(args: Any, tag: str) -> Any:
    from amqp_sansio_fuzz.protocols import generator

    protocol = _protocol(args)
    gen_mod = generator(protocol)
    families = tuple(gen_mod.FAMILIES)
    if getattr(args, "families", None):
        families = tuple(x.strip() for x in args.families.split(",") if x.strip())
        unknown = set(families) - set(gen_mod.FAMILIES)
        if unknown:
            raise CLIError(f"unknown families: {', '.join(sorted(unknown))}")
    ops: tuple[str, ...] = ()
    if getattr(args, "operators", None):
        ops = tuple(x.strip() for x in args.operators.split(",") if x.strip())
        unknown = set(ops) - set(gen_mod.operator_names())
        if unknown:
            raise CLIError(f"unknown operators: {', '.join(sorted(unknown))} "
                           f"(see 'amqp-sansio fuzz operators --protocol {protocol}')")
        families = tuple(sorted({o.split(":")[0] for o in ops}))
    if protocol in FAMILY_091:
        # 0-9-1 brokers (RabbitMQ) offer PLAIN, not ANONYMOUS.
        user = args.user if args.user is not None else "guest"
        password = args.password if args.password is not None else (
            "guest" if args.user is None else "")
        return gen_mod.GenConfig(virtual_host=args.vhost, mechanism="PLAIN", username=user,
                                 password=password,
                                 channel_max=getattr(args, "channel_max", 8),
                                 families=families, operators=ops, run_tag=tag)
    mech = "PLAIN" if args.user is not None else "ANONYMOUS"
    if protocol == "1.0":
        return gen_mod.GenConfig(mechanism=mech, username=args.user, password=args.password,
                                 channel_max=getattr(args, "channel_max", 8),
                                 address_prefix=getattr(args, "address_prefix", ""),
                                 families=families, operators=ops, run_tag=tag)
    return gen_mod.GenConfig(virtual_host=args.vhost, mechanism=mech, username=args.user,
                             password=args.password, channel_max=getattr(args, "channel_max", 8),
                             families=families, operators=ops, run_tag=tag)


def _fail_set(spec_: str) -> frozenset[str]:
    from amqp_sansio_fuzz.oracle import NONCONFORMANT

    if spec_ == "all":
        return NONCONFORMANT
    if spec_ == "none":
        return frozenset()
    kinds = frozenset(x.strip() for x in spec_.split(",") if x.strip())
    unknown = kinds - set(_OUTCOMES)
    if unknown:
        raise CLIError(f"--fail-on: unknown outcomes {', '.join(sorted(unknown))}")
    return kinds


def run_fuzz(args: argparse.Namespace, streams: Streams) -> int:
    if args.action is not None:  # pragma: no cover - argparse routes actions itself
        raise CLIError(f"unknown action {args.action}")
    fail_on = _fail_set(args.fail_on)
    tag = args.tag if args.tag is not None else format(int(time.time() * 10) % (36 ** 5), "x")
    gen = _gen_config(args, tag)
    protocol = _protocol(args)
    embeddable = protocol in ("0-10", "0-9-1", "0-9", "1.0")  # what the embedded broker speaks
    if args.role == "server":
        if protocol not in ("0-10", "1.0"):
            raise CLIError("--role server fuzzes AMQP 0-10 and 1.0 clients (no "
                           f"{protocol} server role yet)")
        return _run_server(args, streams, gen, fail_on)
    if args.target is None and args.target_command is None:
        raise CLIError("--target HOST:PORT" + (" (or 'embedded')" if embeddable else "")
                       + " or --target-command is required")
    if not embeddable and args.target == "embedded":
        raise CLIError("--target embedded is the embedded broker for AMQP 0-10, 0-9-1, 0-9 and 1.0; "
                       f"with --protocol {protocol} give the HOST:PORT of a {protocol} peer")
    if args.target == "embedded":
        require("trio", "--target embedded (the embedded broker)")
    if args.spark:
        require("pyspark", "--spark")
    from amqp_sansio_fuzz.campaign import CampaignConfig

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    sup = _supervisor(args, out, streams)
    try:
        target = sup.target if sup is not None else _parse_target(args.target)
        label = "embedded" if args.target == "embedded" else (
            sup.description if sup is not None and sup.restartable else None)
        cfg = CampaignConfig(target=target, seed=args.seed, cases=args.cases, start=args.start,
                             budget=args.budget, out=out, step_timeout=args.step_timeout,
                             case_timeout=args.case_timeout, gen=gen, minimise=not args.no_minimise,
                             target_label=label, profile=_profile(args),
                             feedback=args.feedback, mutant_share=args.mutant_share)
        if args.spark:
            from amqp_sansio_fuzz.spark import spark_campaign

            result = spark_campaign(cfg, master=args.spark_master, partitions=args.partitions,
                                    log=streams.stderr,
                                    restart=sup.restart if sup is not None and sup.restartable
                                    else None)
        else:
            result = _local_campaign(cfg, args, streams, sup)
    finally:
        if sup is not None:
            sup.close()
    return _finish(result, cfg, args, streams, fail_on, sup)


def _profile(args: Any) -> Any:
    from amqp_sansio_fuzz.profiles import by_name

    name = getattr(args, "profile", "auto") or "auto"
    if name == "auto":
        return None
    try:
        return by_name(name)
    except ValueError as e:
        raise CLIError(str(e)) from None


def _supervisor(args: Any, out: Path | None, streams: Streams) -> Any:
    """The supervised target the options name (None: an address only)."""
    from amqp_sansio_fuzz.campaign import EmbeddedBroker
    from amqp_sansio_fuzz.supervise import CommandTarget, PidTarget, TargetStartError

    given = [x for x in (args.target_command, args.target_pid) if x is not None]
    if len(given) > 1 or (args.target_command is not None and args.target is not None):
        raise CLIError("give one of --target, --target-command (--target-pid goes with "
                       "--target HOST:PORT)")
    if args.target_pid is not None:
        if args.target in (None, "embedded"):
            raise CLIError("--target-pid needs --target HOST:PORT (where that peer listens)")
        return PidTarget(args.target_pid, _parse_target(args.target), args.target_log)
    log = None
    if args.target_command is not None:
        try:
            sup: Any = CommandTarget(shlex.split(args.target_command),
                                     log=out / "target.log" if out is not None else None)
        except ValueError as e:
            raise CLIError(str(e)) from None
    elif args.target == "embedded":
        sup = EmbeddedBroker(log=out / "broker.log" if out is not None else None)
    else:
        return None
    log = sup.log_path
    try:
        target = sup.start()
    except (OSError, TargetStartError) as e:
        raise CLIError(f"{e}" + (f" (see {log})" if log is not None else "")) from None
    print(f"supervising {sup.description} on {target}" + (f" (log: {log})" if log else ""),
          file=streams.stderr)
    return sup


def _parse_target(s: str) -> Any:
    from amqp_sansio_fuzz.runner import parse_target

    try:
        return parse_target(s)
    except ValueError as e:
        raise CLIError(str(e)) from None


def _local_campaign(cfg: Any, args: Any, streams: Streams, sup: Any) -> Any:
    from amqp_sansio_fuzz.campaign import Progress, campaign

    def progress(p: Progress) -> None:
        if args.quiet:
            return
        c = p.counts
        bad = sum(n for k, n in c.items() if k not in ("accepted", "rejected", "deviation"))
        rate = p.done / p.elapsed if p.elapsed > 0 else 0.0
        dev = f"  deviation {c['deviation']}" if c["deviation"] else ""
        line = (f"[{p.done:>6}/{p.total}] {rate:6.1f} cases/s  accepted {c['accepted']}  "
                f"rejected {c['rejected']}{dev}  non-conformant {bad}  {p.elapsed:6.1f}s")
        end = "\n" if p.last is None else ""
        print("\r" + line, end=end, file=streams.stderr, flush=True)

    with open(cfg.out / "results.jsonl", "w", encoding="utf-8") as rows_out:
        return campaign(cfg, progress, sup=sup, rows_out=rows_out)


def _finish(result: Any, cfg: Any, args: Any, streams: Streams, fail_on: frozenset[str],
            sup: Any = None) -> int:
    from amqp_sansio_fuzz.campaign import findings, summary_table

    table = summary_table(result.rows)
    n = len(result.rows)
    rate = n / result.elapsed if result.elapsed else 0.0
    where = f"{sup.description} on {cfg.target}" if sup is not None else str(cfg.target)
    head = (f"amqp-sansio fuzz: {n} AMQP {cfg.protocol} cases against {where} "
            f"(seed {cfg.seed}, cases "
            f"{cfg.start}..{cfg.start + n - 1}{', spark' if args.spark else ''}) in "
            f"{result.elapsed:.1f}s ({rate:.1f} cases/s); ended: {result.stopped}")
    lines = [head, f"oracle profile: {result.profile or '(none: no case reached the peer)'}"]
    if result.coverage:
        c = result.coverage
        fb = (f"; feedback: {result.seeds} seeds, {result.mutants} mutants played"
              if cfg.feedback else "")
        lines.append(f"peer states reached: {c['states']} states, {c['transitions']} "
                     f"transitions, {c['paths']} response sequences{fb}")
    lines += ["", table, ""]
    if result.reproducers:
        lines.append(f"reproducers ({len(result.reproducers)}):")
        lines += [f"  {p}{_flaky(p)}" for p in result.reproducers]
    else:
        lines.append("reproducers: none")
    text = "\n".join(lines)
    (cfg.out / "summary.txt").write_text(text + "\n", "utf-8")
    (cfg.out / "findings.md").write_text(
        findings(result, title=f"amqp-sansio fuzz findings: AMQP {cfg.protocol}, {where}",
                 command=_command_line(args, cfg), summary=text), "utf-8")
    _out(streams, text)
    _out(streams, f"findings report: {cfg.out / 'findings.md'}")
    bad = {r.outcome for r in result.rows} & fail_on
    return 1 if bad else 0


def _command_line(args: Any, cfg: Any) -> str:
    """The campaign's command line, as a maintainer would type it again."""
    parts = ["amqp-sansio", "fuzz", "--protocol", cfg.protocol]
    for opt, v in (("--target", args.target), ("--target-command", args.target_command),
                   ("--target-pid", args.target_pid), ("--target-log", args.target_log),
                   ("--seed", args.seed), ("--cases", args.cases), ("--start", args.start or None),
                   ("--families", args.families), ("--operators", args.operators),
                   ("--tag", args.tag)):
        if v is not None:
            parts += [opt, str(v)]
    return " ".join(shlex.quote(x) for x in parts)


def _flaky(path: Path) -> str:
    try:
        j = json.loads(Path(path).read_text("utf-8"))
    except (OSError, ValueError):
        return ""
    if j.get("minimised", {}).get("reproducible") is False:
        return "  (did not fail again on replay: timing-dependent)"
    return ""


def _run_server(args: Any, streams: Streams, gen: Any, fail_on: frozenset[str]) -> int:
    from amqp_sansio_fuzz.campaign import summary_table
    from amqp_sansio_fuzz.server import ServerCampaignConfig, serve_campaign

    listen = _parse_target(args.listen)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.target_command and args.client_command:
        raise CLIError("--role server: give the client command once (--target-command or "
                       "--client-command)")
    command = args.target_command or args.client_command
    client = tuple(shlex.split(command)) if command else ()
    cfg = ServerCampaignConfig(listen=listen, seed=args.seed, cases=args.cases,
                               start=args.start, budget=args.budget, out=out,
                               step_timeout=args.step_timeout, protocol=_protocol(args),
                               client=client)

    def ready(host: str, port: int) -> None:
        print(f"fuzzing clients on {host}:{port}", file=streams.stderr, flush=True)

    result = serve_campaign(cfg, ready=ready)
    n = len(result.rows)
    text = "\n".join([f"amqp-sansio fuzz --role server: {n} AMQP {cfg.protocol} client "
                      f"connections on "
                      f"{listen} (seed {cfg.seed}) in {result.elapsed:.1f}s; "
                      f"ended: {result.stopped}", "", summary_table(result.rows), "",
                      "reproducers:" if result.reproducers else "reproducers: none",
                      *[f"  {p}" for p in result.reproducers]])
    (out / "summary.txt").write_text(text + "\n", "utf-8")
    _out(streams, text)
    return 1 if {r.outcome for r in result.rows} & fail_on else 0


def run_replay(args: argparse.Namespace, streams: Streams) -> int:
    from amqp_sansio_fuzz import reproducer
    from amqp_sansio_fuzz.oracle import NONCONFORMANT
    from amqp_sansio_fuzz.play import run_case
    from amqp_sansio_fuzz.protocols import gen_config_of, make_case
    from amqp_sansio_fuzz.runner import RunConfig
    from amqp_sansio_fuzz.signals import MonitorConfig

    try:
        case, j = reproducer.load(args.file)
    except (OSError, ValueError, KeyError) as e:
        raise CLIError(f"cannot read {args.file}: {e}") from None
    if getattr(args, "protocol", None) is not None and args.protocol != case.protocol:
        raise CLIError(f"{args.file} is an AMQP {case.protocol} reproducer, not "
                       f"{args.protocol}")
    if case.role == "server":
        return _replay_server(args, streams, j)
    g = j.get("generator", {})
    if args.fresh:
        over: dict[str, Any] = {"run_tag": format(int(time.time() * 10) % (36 ** 5), "x")}
        if args.password is not None:
            over["password"] = args.password
        elif case.protocol in FAMILY_091:
            over["password"] = "guest"
        try:
            gen = gen_config_of(g, **over)
        except (TypeError, ValueError) as e:
            raise CLIError(f"{args.file}: bad generator configuration: {e}") from None
        case = make_case(case.seed, case.number, gen)
        # the whole case: minimisation picked items of another name tag
    target_s = args.target or j.get("target")
    if args.target is None and args.target_command is None and args.target_pid is None and (
            "{port}" in str(target_s)):
        args.target_command = target_s  # found under supervision: the same command
    if args.target_command is not None or args.target_pid is not None:
        target_s = args.target
    elif case.protocol != "0-10" and target_s in ("embedded", None):
        raise CLIError(f"a {case.protocol} reproducer needs --target HOST:PORT or "
                       "--target-command (the embedded broker replays 0-10 ones)")
    from amqp_sansio_fuzz.campaign import play_supervised

    if target_s is None and args.target_command is None:
        target_s = "embedded"
    args.target = target_s if args.target_command is None else None
    sup = None
    try:
        if args.target_command is not None or args.target_pid is not None or (
                target_s == "embedded"):
            if target_s == "embedded":
                require("trio", "replaying against the embedded broker")
            sup = _supervisor(args, None, streams)
            target = sup.target
        else:
            target = _parse_target(str(target_s))
        mech = "PLAIN" if args.user is not None else g.get("mechanism", "ANONYMOUS")
        cfg = RunConfig(target=target, step_timeout=args.step_timeout,
                        case_timeout=args.case_timeout, monitor=MonitorConfig(
            role=case.role, mechanism=mech, username=args.user or g.get("username"),
            password=args.password, virtual_host=args.vhost))
        result = play_supervised(case, cfg, sup) if sup is not None else run_case(case, cfg)
    finally:
        if sup is not None:
            sup.close()
    recorded = j.get("outcome", {})
    recorded_sig = (j.get("death") or {}).get("signature")
    signature = result.death.signature if result.death is not None else None
    same = recorded.get("kind") == result.outcome.kind and (
        recorded_sig is None or recorded_sig == signature)
    out: dict[str, Any] = {
        "case": case.name, "protocol": case.protocol, "target": str(target),
        "fault": case.fault.kind, "outcome": result.outcome.to_json(), "recorded": recorded,
        "reproduced": same, "signals": [s.to_json() for s in result.observation.signals],
        "violations": [str(v) for v in result.observation.violations],
        "duration": round(result.duration, 3)}
    if recorded_sig is not None or signature is not None:
        out["signature"] = signature
        out["recorded_signature"] = recorded_sig
    if result.death is not None:
        out["target_output"] = result.death.tail[-1500:]
    _out(streams, json.dumps(out, indent=1))
    return 1 if result.outcome.kind in NONCONFORMANT else 0


def _replay_server(args: Any, streams: Streams, j: dict[str, Any]) -> int:
    """Wait for one client on --listen and play the recorded plan to it."""
    import socket

    from amqp_sansio_fuzz.server import ServerPlan, run_plan

    plan = ServerPlan.from_json(j["generator"]["plan"])
    listen = _parse_target(args.listen)
    with socket.create_server((listen.host, listen.port)) as srv:
        host, port = srv.getsockname()[:2]
        print(f"waiting for a client on {host}:{port}", file=streams.stderr, flush=True)
        conn, _ = srv.accept()
        with conn:
            case, outcome, obs, _ = run_plan(conn, plan, args.step_timeout)
    recorded = j.get("outcome", {})
    _out(streams, json.dumps({
        "case": case.name, "role": "server", "plan": plan.to_json(),
        "outcome": outcome.to_json(), "recorded": recorded,
        "reproduced": recorded.get("kind") == outcome.kind,
        "signals": [s.to_json() for s in obs.signals],
        "violations": [str(v) for v in obs.violations]}, indent=1))
    return 0 if outcome.conformant else 1


def run_show(args: argparse.Namespace, streams: Streams) -> int:
    from amqp_sansio_fuzz.protocols import generator

    gen_mod = generator(_protocol(args))
    case = gen_mod.make_case(args.seed, args.case)
    _out(streams, gen_mod.describe(case))
    if args.hex:
        for i, it in enumerate(case.items):
            _out(streams, f"{i:3d} {it.data.hex()}")
    return 0


def run_operators(args: argparse.Namespace, streams: Streams) -> int:
    from amqp_sansio_fuzz.protocols import generator

    gen_mod = generator(_protocol(args))
    _out(streams, f"AMQP {_protocol(args)} operators:")
    for fam, ops in gen_mod.OPERATORS.items():
        _out(streams, f"{fam} (weight {gen_mod.FAMILIES[fam]}): "
             + ", ".join(n for n, _, _ in ops))
    return 0
