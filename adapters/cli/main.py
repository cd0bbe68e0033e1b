"""amqp-sansio command line (placeholder until the CLI lands)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("amqp-sansio: CLI not built yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
