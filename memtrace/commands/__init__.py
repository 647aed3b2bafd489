"""One module per ``memtrace`` subcommand; each has ``register(subparsers)`` and ``run(args) -> int``.

Command modules import only argparse at the top; the analysis they call is imported in ``run``.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

COMMANDS = ("summary",)


def register_all(subparsers: Any) -> None:
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)


def add_trace_options(parser: argparse.ArgumentParser) -> None:
    """The trace to read and the optional separate GraphDef, shared by every command."""
    parser.add_argument("trace", metavar="TRACE", help="RunMetadata or StepStats: text or binary, optionally gzip")
    parser.add_argument("--graph", metavar="FILE", help="a GraphDef (text or binary) to take op types and inputs from")


def add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="write JSON instead of text")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
