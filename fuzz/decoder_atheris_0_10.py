"""atheris (libFuzzer) target for the decoder invariant (fuzz/README.md).

    pip install atheris
    python fuzz/decoder_atheris_0_10.py fuzz/corpus_0_10 -max_total_time=600

Importable without atheris: :func:`test_one_input` is the whole target and
can be called directly (the test suite and the Hypothesis campaign check the
same invariant).  Every input is fed to an AssemblyDecoder under each option
set (whole and octet at a time), and to the codec's decoders.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

MAX_INPUT = 1 << 16


def test_one_input(data: bytes) -> None:
    from test_decoder_fuzz_0_10 import OPTION_SETS, check_codec_bytes, check_stream

    data = data[:MAX_INPUT]
    for opts in OPTION_SETS:
        check_stream(data, opts, bytewise=len(data) <= 2048)
    check_codec_bytes(data[:512])


def main(argv: list[str] | None = None) -> None:
    try:
        atheris = importlib.import_module("atheris")
    except ImportError:
        sys.exit("atheris is not installed: pip install atheris (x86_64 Linux/macOS)")
    with atheris.instrument_imports():
        import amqp_sansio.v0_10.codec  # noqa: F401
        import amqp_sansio.v0_10.framing  # noqa: F401
        import amqp_sansio.v0_10.spec  # noqa: F401
    atheris.Setup(sys.argv if argv is None else argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
