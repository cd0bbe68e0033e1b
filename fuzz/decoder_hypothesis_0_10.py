"""A longer Hypothesis campaign over the decoder invariant (fuzz/README.md).

    python fuzz/decoder_hypothesis_0_10.py --minutes 3 [--seed N] [--corpus fuzz/corpus_0_10]

Runs batches of examples until the time is up: random octets, frames around
random payloads, mutated valid conversations and mutated corpus seeds, fed
to AssemblyDecoder under every option set, plus the codec's decoders on
their own.  The checks are the ones tests/fuzz/test_decoder_fuzz_0_10.py makes; this
just runs them for longer.  Exits 1 with the shrunk failing input on a
violation (Hypothesis also stores it in fuzz/.hypothesis, so rerunning
replays it first).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.database import DirectoryBasedExampleDatabase  # noqa: E402
from test_decoder_fuzz_0_10 import (  # noqa: E402
    OPTION_SETS,
    check_codec_bytes,
    check_stream,
    mutated,
    streams,
)


def load_corpus(path: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(path.glob("*.bin"))] if path.is_dir() else []


def campaign(minutes: float, first_seed: int, corpus: list[bytes], batch: int) -> int:
    inputs = streams
    if corpus:
        inputs = st.one_of(streams, st.sampled_from(corpus).flatmap(mutated))
    db = DirectoryBasedExampleDatabase(str(Path(__file__).parent / ".hypothesis"))
    stats = {"examples": 0}

    def target(data: bytes, opts: dict[str, bool]) -> None:
        stats["examples"] += 1
        check_stream(data, opts)
        check_codec_bytes(data[:200])

    deadline = time.monotonic() + minutes * 60
    rng = random.Random(first_seed)
    rounds = 0
    while time.monotonic() < deadline:
        s = rng.randrange(1 << 32)

        @seed(s)
        @settings(max_examples=batch, deadline=None, database=db, print_blob=True,
                  suppress_health_check=list(HealthCheck))
        @given(data=inputs, opts=st.sampled_from(OPTION_SETS))
        def run(data: bytes, opts: dict[str, bool]) -> None:
            target(data, opts)

        try:
            run()
        except Exception:
            traceback.print_exc()
            print(f"FAILED in round {rounds} (seed {s}) after {stats['examples']} examples",
                  file=sys.stderr)
            return 1
        rounds += 1
    print(f"ok: {stats['examples']} examples in {rounds} rounds, {minutes} min, "
          f"first seed {first_seed}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--minutes", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--batch", type=int, default=300, help="examples per round")
    ap.add_argument("--corpus", type=Path, default=Path(__file__).parent / "corpus")
    args = ap.parse_args(argv)
    first = args.seed if args.seed is not None else random.randrange(1 << 32)
    return campaign(args.minutes, first, load_corpus(args.corpus), args.batch)


if __name__ == "__main__":
    sys.exit(main())
