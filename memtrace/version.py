"""memtrace's version, one place for the package, its outputs (page footers, exported traces) and ``--version``."""

__version__ = "0.1.0"
