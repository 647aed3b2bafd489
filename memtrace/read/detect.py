"""Telling the input forms apart by content, and the fast readers' way of declining one.

A file's name says nothing: gzip is recognised by its magic bytes, binary protobuf by not being
text, and protobuf text by its first field name (``dev_stats`` opens a StepStats,
``step_stats`` and the graph fields a RunMetadata, ``node`` a GraphDef).
"""

from __future__ import annotations

import codecs
import re

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_CHARS = 65536
SNIFF_BYTES = 4 * SNIFF_CHARS + 4  # enough bytes for that many characters
CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_FIRST_FIELD = re.compile(r"\s*(?:#[^\n]*\n\s*)*([A-Za-z_][A-Za-z0-9_]*|\S)")

STEP_STATS_FIELDS = {"dev_stats"}
RUN_METADATA_FIELDS = {"step_stats", "cost_graph", "partition_graphs", "function_graphs", "session_metadata"}
GRAPH_DEF_FIELDS = {"node", "versions", "version", "library", "debug_info"}


class Unrecognised(Exception):
    """The input is outside what a fast reader handles; protobuf's parser must read it."""


class UnknownField(Exception):
    """A field the schema does not have (or an extension) in a message a fast reader parses itself:
    invalid, and refused with the words, line and column protobuf's text parser gives for it."""

    def __init__(self, detail: str, line: int, column: int):
        super().__init__(detail, line, column)
        self.detail, self.line, self.column = detail, line, column
        self.context: object = None  # from a worker process: what its chunk assumed and read before the field


class TooLarge(Exception):
    """One piece of the input (a line, a name) is larger than any reader should hold: refused."""


def as_text(data: bytes) -> str | None:
    """The content as text if it looks like protobuf text format (or JSON), else None."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if CONTROL.search(text, 0, SNIFF_CHARS) else text


def sniff_text(head: bytes, complete: bool) -> str | None:
    """The start of the content as text, or None if it cannot be protobuf text (invalid UTF-8)."""
    try:
        return codecs.getincrementaldecoder("utf-8")().decode(head, final=complete)
    except UnicodeDecodeError:
        return None


def first_field(text: str) -> str | None:
    """The first field name of protobuf text (after blank lines and comments), or its first character."""
    match = _FIRST_FIELD.match(text)
    return match.group(1) if match else None


def first_field_at(text: str) -> tuple[int, int]:
    """The line and column (from 1) where :func:`first_field` found what it found."""
    match = _FIRST_FIELD.match(text)
    if match is None:
        return 1, 1
    start = match.start(1)
    return text.count("\n", 0, start) + 1, start - (text.rfind("\n", 0, start) + 1) + 1


_TOML_TABLE = re.compile(r"\[\[?\s*[\"']?[A-Za-z0-9_.:-]+[\"']?\s*\]\]?\s*(?:#[^\n]*)?$", re.MULTILINE)


def looks_like(text: str) -> str:
    """For text whose first character is ``{`` or ``[``: ``"TOML or INI"`` when it opens a table
    (``[project]``), else ``"JSON"``."""
    stripped = _FIRST_FIELD.match(text)
    start = stripped.start(1) if stripped else 0
    return "TOML or INI" if _TOML_TABLE.match(text, start) else "JSON"


def looks_like_xspace(head: bytes) -> bool:
    """Whether binary protobuf opens like an XSpace: field 1 holds an XPlane named like ``/host:CPU``.

    An XPlane starts with its ``id`` (field 1, a varint, left out when 0) and then its ``name``
    (field 2). A StepStats or RunMetadata also opens with field 1, but its first inner field is
    field 1 again (a device name or a DeviceStepStats), never a varint followed by field 2.
    """
    if len(head) < 4 or head[0] != 0x0A:
        return False
    position = _skip_varint(head, 1)  # the plane's length
    if position < len(head) and head[position] == 0x08:  # the plane's id
        position = _skip_varint(head, position + 1)
    if position >= len(head) or head[position] != 0x12:
        return False
    start = _skip_varint(head, position + 1)
    return head[start:start + 6] in (b"/host:", b"/devic") or head[start:start + 16] == b"Task Environment"


def _skip_varint(data: bytes, position: int) -> int:
    """The position after the varint at ``position`` (or past the end of ``data``)."""
    while position < len(data) and data[position] & 0x80:
        position += 1
    return position + 1
