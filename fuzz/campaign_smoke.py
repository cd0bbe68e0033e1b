"""A short fuzz campaign against the embedded broker (what CI asserts on).

    python fuzz/campaign_smoke.py [--cases N] [--seed S] [--out DIR]

Starts the embedded broker in a subprocess, plays N cases (default 300) of
``amqp-sansio fuzz`` against it, prints the summary table, and exits 1 if
any case ended in a peer crash or a hang -- the embedded broker must survive
its own fuzzer.  Other non-conformant outcomes are listed (with minimised
reproducers under DIR/reproducers) but do not fail the smoke run; the full
list of what the fuzzer found is in adapters/fuzz/README.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from amqp_sansio_fuzz.campaign import CampaignConfig, EmbeddedBroker, campaign, summary_table
from amqp_sansio_fuzz.generate_0_10 import GenConfig


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=300)
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--step-timeout", type=float, default=3.0)
    args = p.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="amqp-fuzz-smoke-"))
    with EmbeddedBroker(log=out / "broker.log") as broker:
        assert broker.target is not None
        cfg = CampaignConfig(target=broker.target, seed=args.seed, cases=args.cases, out=out,
                             gen=GenConfig(run_tag="smoke"), step_timeout=args.step_timeout,
                             target_label="embedded")
        result = campaign(cfg, restart=broker.restart)
    print(f"{len(result.rows)} cases in {result.elapsed:.1f}s against the embedded broker")
    print(summary_table(result.rows))
    for path in result.reproducers:
        print(f"  reproducer: {path}")
    bad = [r for r in result.rows if r.outcome in ("crash", "hang")]
    for r in bad:
        print(f"FAIL case {r.case}: {r.outcome}: {r.detail}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
