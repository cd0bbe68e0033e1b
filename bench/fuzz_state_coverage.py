"""Peer states reached by a fuzz campaign: with and without state feedback,
and without this session's bug-class operators, over the same budget.

    .venv/bin/python bench/fuzz_state_coverage.py                      # 0-10, 0-9-1, 1.0
    .venv/bin/python bench/fuzz_state_coverage.py --protocol 0-10 --cases 2000 --seeds 1,2,3
    .venv/bin/python bench/fuzz_state_coverage.py --target 127.0.0.1:5672 --protocol 0-9-1

A *state* is a token of the peer's response sequence (what it sent:
``session.attached``, ``execution.exception:404``, ``close:530``, ...), a
*transition* two consecutive tokens, a *path* a whole sequence (see
``amqp_sansio_fuzz.feedback``).  Three arms per protocol and seed, each
``--cases`` cases against a fresh embedded broker (or ``--target``):

* ``generated`` -- the generator alone (every operator);
* ``feedback`` -- the same budget, half of it (once there are seeds) on
  mutants of the cases that reached a new state or transition;
* ``no-new-ops`` -- the generator without the serial-extremes /
  tag-extremes / disposition-extremes / content-after / unattached-controls
  operators (what they add).

Prints one line per arm and the feedback / generated ratios; ``--json``
writes the figures.  No minimisation; non-conformant counts are shown so
that a coverage gain is not bought with false findings.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from amqp_sansio_fuzz.campaign import CampaignConfig, EmbeddedBroker, campaign
from amqp_sansio_fuzz.oracle import NONCONFORMANT
from amqp_sansio_fuzz.protocols import generator
from amqp_sansio_fuzz.runner import parse_target

#: The bug-class operators added with the state feedback (issue 28).
NEW_OPERATORS = {
    "0-10": ("state:serial-extremes", "state:content-after"),
    "0-9-1": ("state:tag-extremes", "state:content-after"),
    "1.0": ("state:disposition-extremes", "state:unattached-controls"),
}


def gen_config(protocol: str, tag: str, operators: tuple[str, ...] = ()) -> Any:
    mod = generator(protocol)
    kw: dict[str, Any] = {"run_tag": tag, "operators": operators}
    if protocol == "0-9-1":
        kw.update(mechanism="PLAIN", username="guest", password="guest")
    if operators:
        kw["families"] = tuple(sorted({o.split(":")[0] for o in operators}))
    return mod.GenConfig(**kw)


def arm(protocol: str, seed: int, cases: int, name: str, target: Any) -> dict[str, Any]:
    ops: tuple[str, ...] = ()
    if name == "no-new-ops":
        ops = tuple(o for o in generator(protocol).operator_names()
                    if o not in NEW_OPERATORS[protocol])
    tag = f"cov{seed}{name[:2]}{int(time.time()) % 100000:x}"
    cfg = CampaignConfig(target=target, seed=seed, cases=cases, gen=gen_config(protocol, tag, ops),
                         minimise=False, feedback=name == "feedback", probe_every=0)
    t0 = time.monotonic()
    r = campaign(cfg)
    bad = sum(1 for row in r.rows if row.outcome in NONCONFORMANT)
    return {"protocol": protocol, "seed": seed, "arm": name, "cases": len(r.rows),
            **r.coverage, "seeds_kept": r.seeds, "mutants": r.mutants, "nonconformant": bad,
            "seconds": round(time.monotonic() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--protocol", default="0-10,0-9-1,1.0")
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--arms", default="generated,feedback,no-new-ops")
    ap.add_argument("--target", default=None, help="HOST:PORT (default: a fresh embedded "
                    "broker per arm)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    out = []
    print(f"load average {os.getloadavg()[0]:.1f}; {args.cases} cases per arm", flush=True)
    print(f"{'protocol':8} {'seed':>4} {'arm':11} {'states':>6} {'trans':>6} {'paths':>6} "
          f"{'seeds':>5} {'mutants':>7} {'bad':>4} {'secs':>6}")
    for protocol in args.protocol.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            for name in args.arms.split(","):
                if args.target:
                    row = arm(protocol, seed, args.cases, name, parse_target(args.target))
                else:
                    with EmbeddedBroker() as b:
                        row = arm(protocol, seed, args.cases, name, b.target)
                out.append(row)
                print(f"{protocol:8} {seed:>4} {name:11} {row['states']:>6} "
                      f"{row['transitions']:>6} {row['paths']:>6} {row['seeds_kept']:>5} "
                      f"{row['mutants']:>7} {row['nonconformant']:>4} {row['seconds']:>6}",
                      flush=True)
    print()
    for protocol in args.protocol.split(","):
        gen = [r for r in out if r["protocol"] == protocol and r["arm"] == "generated"]
        fb = [r for r in out if r["protocol"] == protocol and r["arm"] == "feedback"]
        if gen and fb:
            for k in ("states", "transitions", "paths"):
                g = sum(r[k] for r in gen) / len(gen)
                f = sum(r[k] for r in fb) / len(fb)
                print(f"{protocol} {k}: feedback / generated = {f:.1f} / {g:.1f} = "
                      f"{f / g if g else float('nan'):.2f}x (mean over seeds)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
