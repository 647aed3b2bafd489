"""``python -m memtrace`` is the ``memtrace`` command."""

import sys

from .cli import main

if __name__ == "__main__":  # (not when a reading process imports this module as its parent's main)
    sys.exit(main())
