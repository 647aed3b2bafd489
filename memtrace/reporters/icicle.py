"""The live set at the peak as an icicle: name scopes as nested bars, each as wide as its bytes.

Like memray's flame graph at the high-water mark, but of TensorFlow name scopes: the top row is
the whole live set, each row below splits its parent by the next scope level. A click on a bar
zooms into it (the script in ``html.py`` redraws the rows), a click on the top row zooms out.
Built as plain HTML (one absolutely placed ``<div>`` a bar), so it needs no drawing library.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..analyses.peak import LiveAllocation
from ..units import format_bytes, plural

ROW_HEIGHT = 22  # pixels
MAX_DEPTH = 12
MIN_FRACTION = 0.002  # bars narrower than this share of the whole are not drawn


@dataclass
class ScopeNode:
    """One name scope (or op) and the live bytes under it."""

    name: str
    path: str
    bytes: int = 0
    count: int = 0
    children: dict[str, ScopeNode] = field(default_factory=dict)


def scope_path(node: str) -> list[str]:
    """A node name's scopes and op: the icicle's rows by name scope."""
    return node.split(":", 1)[0].split("/")


def scope_tree(live: Iterable[LiveAllocation], root_name: str = "live set",
               path_of: Callable[[LiveAllocation], list[str]] | None = None) -> ScopeNode:
    """The allocations with positive bytes arranged by the ``/``-separated scopes of their node names
    (or by the rows ``path_of`` gives an allocation: phase, layer, op)."""
    root = ScopeNode(root_name, "")
    for allocation in live:
        if allocation.bytes <= 0:
            continue  # a free of memory from before the step: no place in a tree of holders
        node = root
        node.bytes += allocation.bytes
        node.count += 1
        parts = scope_path(allocation.node) if path_of is None else path_of(allocation)
        for depth, part in enumerate(parts):
            path = "/".join(parts[: depth + 1])
            node = node.children.setdefault(part, ScopeNode(part, path))
            node.bytes += allocation.bytes
            node.count += 1
    return root


def render_html(live: Iterable[LiveAllocation], chart: int,
                path_of: Callable[[LiveAllocation], list[str]] | None = None) -> str:
    """The icicle's HTML for one allocator (``chart`` numbers it on the page); by name scope, or by the
    rows ``path_of`` gives (the phase of the step, then the Keras layer, then the op within the layer)."""
    root = scope_tree(live, path_of=path_of)
    if root.bytes <= 0:
        return ""
    bars: list[str] = []
    deepest = _place(root, 0.0, 1.0, 0, root.bytes, bars)
    return (
        f'<div class="icicle" data-icicle="{chart}" style="height:{(deepest + 1) * ROW_HEIGHT}px" role="tree" '
        f'aria-label="live set at the peak by {"name scope" if path_of is None else "phase and layer"}">'
        + "".join(bars)
        + "</div>\n"
        f'<p class="hint">Each bar is {"a name scope" if path_of is None else "a phase of the step (forward, backward, optimizer, other), then a Keras layer, then an op (its name within the layer)"}, '
        "as wide as the bytes it holds at the peak; click a bar to open it, click the top row to go back.</p>\n"
    )


def _place(node: ScopeNode, x0: float, x1: float, depth: int, whole: int, bars: list[str]) -> int:
    label = node.name
    while depth and len(node.children) == 1:  # a chain of scopes holding the same bytes is one bar
        (only,) = node.children.values()
        if only.bytes != node.bytes:
            break
        label, node = f"{label}/{only.name}", only
    share = 100 * node.bytes / whole
    title = f"{node.path or node.name}\n{format_bytes(node.bytes)} ({node.bytes:,} bytes, {share:.1f}% of the live set) " \
        f"in {plural(node.count, 'allocation')}"
    bars.append(
        f'<div class="ic d{depth % 6}" data-x0="{x0:.6f}" data-x1="{x1:.6f}" data-depth="{depth}" '
        f'style="left:{100 * x0:.4f}%;width:{100 * (x1 - x0):.4f}%;top:{depth * ROW_HEIGHT}px" '
        f'title="{html.escape(title)}">{html.escape(label)} <span class="ic-size">{html.escape(format_bytes(node.bytes))}</span></div>'
    )
    deepest = depth
    if depth >= MAX_DEPTH:
        return deepest
    start = x0
    for child in sorted(node.children.values(), key=lambda c: (-c.bytes, c.name)):
        width = (x1 - x0) * child.bytes / node.bytes
        if child.bytes / whole >= MIN_FRACTION:
            deepest = max(deepest, _place(child, start, start + width, depth + 1, whole, bars))
        start += width
    return deepest
