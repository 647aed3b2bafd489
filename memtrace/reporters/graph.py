"""Writing the dataflow graph for Graphviz (DOT), Gephi or yEd (GraphML) and scripts (node-link JSON).

Names from the trace are data: in DOT every identifier and value is a quoted string with quotes
and backslashes escaped; in GraphML control characters (which XML 1.0 cannot carry) are escaped
as ``\\xNN`` before the XML writer escapes the rest; JSON escapes everything itself.
"""

from __future__ import annotations

import hashlib
import re
from typing import IO, TYPE_CHECKING, Any

from ..units import format_bytes
from .common import clean, strict_json

if TYPE_CHECKING:
    import networkx as nx

SCHEMA = "memtrace.graph/1"
def render_json(graph: nx.MultiDiGraph, out: IO[str]) -> None:
    """networkx node-link data (``nx.node_link_graph(data, edges="edges")`` reads it back)."""
    import networkx as nx

    data = nx.node_link_data(graph, edges="edges")
    data["graph"] = {"schema": SCHEMA, **data["graph"]}
    out.write(strict_json(data, indent=1))
    out.write("\n")


def render_graphml(graph: nx.MultiDiGraph, out: IO[str]) -> None:
    import networkx as nx

    safe = nx.MultiDiGraph(**{k: _safe(v) for k, v in graph.graph.items()})
    for name, attributes in graph.nodes(data=True):
        safe.add_node(_safe(name), **{k: _safe(v) for k, v in attributes.items()})
    for producer, consumer, key, attributes in graph.edges(keys=True, data=True):
        safe.add_edge(_safe(producer), _safe(consumer), key=key, **{k: _safe(v) for k, v in attributes.items()})
    for line in nx.generate_graphml(safe):
        out.write(line + "\n")


# Characters XML 1.0 cannot carry at all, even as character references (besides the controls
# that clean() escapes): the noncharacters U+FFFE and U+FFFF and lone surrogates.
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")
# Graphviz refuses a quoted string longer than 16,384 bytes; a name is cut well before that, so a
# label of three of them (escaped, in up to four UTF-8 bytes a character) still fits.
DOT_MAX_CHARS = 1000


def _safe(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", clean(value))


def _shorten(text: str) -> str:
    """At most DOT_MAX_CHARS characters; a longer text is cut and keeps a digest of the whole, so
    two long names that share their start stay two nodes."""
    if len(text) <= DOT_MAX_CHARS:
        return text
    digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{text[:DOT_MAX_CHARS - 64]}...({len(text)} characters, sha1 {digest})"


def _quote(value: Any) -> str:
    """A DOT quoted string: control characters, backslashes and quotes escaped, cut to DOT_MAX_CHARS."""
    text = _shorten(clean(str(value))) if not isinstance(value, bool) else str(value).lower()
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label(*lines: str) -> str:
    """A DOT label of several lines: each line quoted as data, joined with DOT's own line break."""
    escaped = [_quote(line)[1:-1] for line in lines if line]
    return '"' + "\\n".join(escaped) + '"'


def render_dot(graph: nx.MultiDiGraph, out: IO[str]) -> None:
    out.write("digraph memtrace {\n")
    for key, value in graph.graph.items():
        out.write(f"  graph [{key}={_quote(value)}];\n")
    out.write('  node [shape=box, fontname="Helvetica", fontsize=10];\n')
    out.write('  edge [fontname="Helvetica", fontsize=8];\n')
    for name, attributes in graph.nodes(data=True):
        held = attributes.get("live_at_peak_bytes")
        caption = _label(str(name), str(attributes.get("op_type", "")),
                         f"live at peak: {format_bytes(held)}" if held is not None else "")
        extra = ", ".join(f"{k}={_quote(v)}" for k, v in attributes.items())
        style = ', style=filled, fillcolor="#fde0dd"' if held else ""
        out.write(f"  {_quote(name)} [label={caption}{style}" + (f", {extra}" if extra else "") + "];\n")
    for producer, consumer, attributes in graph.edges(data=True):
        size = attributes.get("allocated_bytes") or attributes.get("requested_bytes")
        caption = _label(f":{attributes['slot']}", str(attributes.get("shape", "")),
                         format_bytes(size) if size else "")
        extra = ", ".join(f"{k}={_quote(v)}" for k, v in attributes.items())
        style = ', color="#d7301f", penwidth=2' if attributes.get("live_at_peak") else ""
        out.write(f"  {_quote(producer)} -> {_quote(consumer)} [label={caption}{style}, {extra}];\n")
    out.write("}\n")


# The formats ``memtrace graph --format`` writes, and the renderer of each.
RENDERERS = {"dot": render_dot, "graphml": render_graphml, "json": render_json}
FORMATS = tuple(RENDERERS)
