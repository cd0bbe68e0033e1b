"""``python -m amqp_sansio_cli``: the ``amqp-sansio`` command without its script."""

import sys

from .main import main

sys.exit(main())
