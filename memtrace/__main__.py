"""``python -m memtrace`` is the ``memtrace`` command."""

import sys

from .cli import main

sys.exit(main())
