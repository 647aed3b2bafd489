"""Text that fits the terminal: tables narrowed to the width, and a stream that never writes wider.

The width is ``COLUMNS`` when set, else the terminal's when stdout is one, else 100 (a pipe or a
file). A table too wide for it first drops the columns its reporter ranks least useful, then
shortens its names: TensorFlow's wrappers (``StatefulPartitionedCall/``) go first, then a node
name is cut from the left, keeping the layer and the op at its end (they say more than the
scopes they sit in); a line of prose is wrapped at spaces. JSON is never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Iterator, Sequence
from typing import IO, Any

DEFAULT_WIDTH = 100
MIN_NAME_WIDTH = 12
ELLIPSIS = "…"


def output_width() -> int:
    """``COLUMNS`` if set to a whole number, else the terminal's width when stdout is one, else 100."""
    text = os.environ.get("COLUMNS", "").strip()
    if text.isdigit() and int(text) > 0:
        return max(int(text), 20)
    try:
        if sys.stdout.isatty():
            return max(shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns, 20)
    except (AttributeError, ValueError, OSError):
        pass
    return DEFAULT_WIDTH


def shorten_middle(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters: the start and the (longer) end, an ellipsis between."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = (width - 1) // 4
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + text[len(text) - tail:]


_WRAPPER = re.compile(r"^((Stateful)?PartitionedCall(_\d+)?|__inference_.*)$")
_PHASE_SCOPES = ("gradient_tape", "gradients")


def shorten_name(text: str, width: int) -> str:
    """A node name (``a/b/c``) in at most ``width`` characters, keeping what says most: the
    function-call wrappers TensorFlow adds (``StatefulPartitionedCall/``) go first, then the name
    is cut from the left at a scope boundary, keeping the layer and the op at its end (and a
    leading ``gradient_tape/``, which says the backward pass). Other text is shortened in the middle."""
    if len(text) <= width:
        return text
    if "/" not in text:
        return shorten_middle(text, width)
    parts = text.split("/")
    parts = [p for p in parts[:-1] if not _WRAPPER.match(p)] + parts[-1:]
    plain = "/".join(parts)
    if len(plain) <= width:
        return plain
    # With the phase scope kept where the layer (two scopes above the op) still fits after it.
    heads = [parts[0] + "/", ""] if parts[0] in _PHASE_SCOPES else [""]
    for head in heads:
        room = width - len(head) - len(ELLIPSIS)
        if room <= 0:
            continue
        tail = plain[len(plain) - room:]
        boundary = tail.find("/")
        if 0 <= boundary and tail.count("/") >= 2:
            tail = tail[boundary:]  # whole scopes: "…/max_pooling2d_1/MaxPool2d", not "…ling2d_1/MaxPool2d"
        # (where that would leave the op alone, the scope above it is cut instead: "…Logits_grad/ExpandDims")
        if head and tail.count("/") < 3:
            continue
        return head + ELLIPSIS + tail
    return shorten_middle(plain, width)


def _render(rows: Sequence[Sequence[str]], headers: Sequence[str], align: Sequence[str]) -> str:
    from tabulate import tabulate

    return tabulate(rows, headers=headers, tablefmt="simple", colalign=align, disable_numparse=True)


def fit_table(
    rows: Sequence[Sequence[Any]], headers: Sequence[str], align: Sequence[str] | None = None, *,
    indent: int = 0, width: int | None = None, drop: Sequence[str] = (), shrink: Sequence[str] | None = None,
) -> str:
    """A ``tabulate`` table no wider than ``width - indent`` (default :func:`output_width`).

    When too wide: the columns named in ``shrink`` (default: every left-aligned one) are shortened
    in the middle, widest first, down to 40 characters; then the columns named in ``drop`` go, in
    that order; then the names shrink on down to 12 characters; then columns go from the right
    (never the first); whatever still does not fit is cut.
    """
    limit = (width or output_width()) - indent
    original = [[str(c) for c in row] for row in rows]
    all_aligns = list(align) if align is not None else ["left"] * len(headers)
    names = list(shrink) if shrink is not None else [h for h, a in zip(headers, all_aligns) if a == "left"]
    dropped: list[str] = []

    def attempt(floor: int) -> str:
        keep = [i for i, h in enumerate(headers) if h not in dropped]
        cells = [[row[i] for i in keep] for row in original]
        heads, aligns = [headers[i] for i in keep], [all_aligns[i] for i in keep]
        return _shrink(cells, heads, aligns, names, limit, floor, _render(cells, heads, aligns))

    text = attempt(COMFORTABLE_NAME_WIDTH)
    for name in drop:
        if _widest(text) <= limit:
            break
        if name in headers:
            dropped.append(name)
            text = attempt(COMFORTABLE_NAME_WIDTH)
    text = attempt(MIN_NAME_WIDTH)
    for name in reversed(headers[1:]):  # the last resort: columns from the right, never the first
        if _widest(text) <= limit:
            break
        if name not in dropped:
            dropped.append(name)
            text = attempt(MIN_NAME_WIDTH)
    return "\n".join(shorten_middle(line, limit) if len(line) > limit else line for line in text.splitlines())


COMFORTABLE_NAME_WIDTH = 40


def _shrink(cells: list[list[str]], heads: list[str], aligns: list[str], names: Sequence[str], limit: int,
            floor: int, text: str) -> str:
    """Shorten the named columns, widest first and one step at a time, until the table fits or each is at ``floor``."""
    while True:
        excess = _widest(text) - limit
        columns = [heads.index(n) for n in names if n in heads]
        if excess <= 0 or not columns:
            return text
        widths = {c: max([len(heads[c]), *(len(row[c]) for row in cells)]) for c in columns}
        order = sorted(columns, key=lambda c: -widths[c])
        column = order[0]
        runner_up = widths[order[1]] if len(order) > 1 else 0
        target = max(floor, len(heads[column]), widths[column] - excess, min(runner_up, widths[column] - 1))
        if target >= widths[column]:
            return text
        for row in cells:
            row[column] = shorten_name(row[column], target)
        text = _render(cells, heads, aligns)


def _widest(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def fit_line(line: str, width: int) -> list[str]:
    """One line of prose as lines of at most ``width``: wrapped at spaces, continuation indented by
    two more than the line; a single word too long for a line is shortened in the middle."""
    if len(line) <= width:
        return [line]
    lead = len(line) - len(line.lstrip(" "))
    indent = " " * min(lead + 2, max(width // 2, 0))
    room = max(width - len(indent), 1)
    body = re.sub(r"\S+", lambda m: shorten_name(m.group(0), room), line[lead:])
    wrapped = textwrap.wrap(
        body, width=width, initial_indent=" " * lead, subsequent_indent=indent,
        break_long_words=True, break_on_hyphens=False,
    )
    return wrapped or [line[:width]]


class FittedStream:
    """A text stream that passes lines through, wrapping any wider than ``width`` (a safety net:
    the reporters' tables fit already, so only prose and long names should ever be wrapped)."""

    def __init__(self, out: IO[str], width: int | None = None) -> None:
        self.out = out
        self.width = width or output_width()
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            for part in fit_line(line, self.width):
                self.out.write(part + "\n")
        return len(text)

    def flush(self) -> None:
        if self._pending:
            for part in fit_line(self._pending, self.width):
                self.out.write(part)
            self._pending = ""
        self.out.flush()


@contextlib.contextmanager
def fitted(out: IO[str]) -> Iterator[IO[str]]:
    """``out`` as a :class:`FittedStream` for the ``with`` block: text that fits the terminal."""
    stream = FittedStream(out)
    yield stream  # type: ignore[misc]
    stream.flush()
