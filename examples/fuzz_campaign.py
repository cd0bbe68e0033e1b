"""A fuzz campaign against the embedded broker, from Python.

    python examples/fuzz_campaign.py [CASES] [SEED]

The same as ``amqp-sansio fuzz --target embedded --cases CASES --seed SEED``:
the broker runs in a subprocess (so that a crash is a crash, and the
campaign can restart it), every case is a pure function of (seed, case
number), and non-conformant outcomes are minimised and saved as replayable
reproducers under the output directory.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from amqp_sansio_fuzz.campaign import CampaignConfig, EmbeddedBroker, campaign, summary_table
from amqp_sansio_fuzz.generate_0_10 import GenConfig
from amqp_sansio_fuzz.oracle import NONCONFORMANT


def main(cases: int, seed: int) -> int:
    out = Path(tempfile.mkdtemp(prefix="amqp-fuzz-example-"))
    with EmbeddedBroker(log=out / "broker.log") as broker:
        assert broker.target is not None
        cfg = CampaignConfig(target=broker.target, seed=seed, cases=cases, out=out,
                             gen=GenConfig(), target_label="embedded")
        result = campaign(cfg, restart=broker.restart)
    print(summary_table(result.rows))
    bad = [r for r in result.rows if r.outcome in NONCONFORMANT]
    print(f"{len(result.rows)} cases in {result.elapsed:.1f} s ({result.stopped}); "
          f"{len(bad)} non-conformant; results and reproducers in {out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300,
                  int(sys.argv[2]) if len(sys.argv) > 2 else 0))
