"""``memtrace tensor`` and ``memtrace graph``: output, formats read back by other tools, exit codes."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import networkx as nx
import pytest

from .conftest import ALEXNET, TINY, require_program
from .helpers import run

CHAIN = TINY / "dataflow_chain.pbtxt"
HOSTILE = 'bad "name" <x> \\ end'


def test_tensor_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "tensor", str(CHAIN), "relu:0", "--json")
    assert code == 0
    assert json.loads(out) == {
        "schema": "memtrace.tensor/1",
        "trace": str(CHAIN),
        "allocator": "bfc",
        "allocation_id": 4,
        "producer": {"node": "mm", "slot": 0, "op_type": "MatMul"},
        "aliases": [{"node": "relu", "slot": 0}],
        "consumers": [{"node": "sink", "start_us": 50}, {"node": "late", "start_us": 70}],
        "requested_bytes": 1024,
        "allocated_bytes": 1024,
        "dtype": "float32",
        "shape": [16, 16],
        "ptr": 4000,
        "alloc_time_us": 32,
        "free_time_us": 96,
        "lifetime_us": 64,
        "source": "records",
        "live_at_peak": True,
        "peak_time_us": 75,
        "producer_executions": 1,
    }


def test_tensor_text_tells_the_story(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "tensor", str(ALEXNET), "GPU_0_bfc:183")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "buffer GPU_0_bfc:183  float32 [128,64,56,56]"
    assert "conv1/Conv2D:0 (Conv2D)" in lines[1]
    assert "conv1/BiasAdd:0" in lines[2] and "conv1:0" in lines[3]
    assert "conv1-0-0-TransposeNCHWToNHWC-LayoutOptimizer" in lines[4]
    assert "gradients/conv1_grad/ReluGrad" in lines[5]
    assert "98 MiB requested (102,760,448 bytes)" in out
    assert "live at GPU_0_bfc's peak" in out


def test_tensor_text_escapes_control_characters(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    trace = tmp_path / "ansi.pbtxt"
    trace.write_text(CHAIN.read_text().replace('"sink', '"\\033[31msink'))
    code, out, _ = run(capsys, "tensor", str(trace), "bfc:5")
    assert code == 0
    assert "\x1b" not in out and "\\x1b[31msink:0" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tensor", str(CHAIN), "bfc:99"], "no output of bfc has allocation id 99"),
        (["tensor", str(CHAIN), "nosuch"], "nor NODE:SLOT of an op in the trace"),
        (["graph", str(CHAIN), "--around", "nosuch"], "no op 'nosuch' in the dataflow"),
        (["graph", str(CHAIN), "--live-at-peak", "GPU_0_bfc"], "no allocator 'GPU_0_bfc' in this trace (it has: bfc)"),
        (["graph", str(CHAIN), "--depth", "2"], "--depth needs --around NODE"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("memtrace: error: ") and message in err


def test_graph_format_follows_the_extension(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for name, first in (("g.dot", "digraph memtrace {"), ("g.graphml", "<graphml"), ("g.json", "{")):
        assert run(capsys, "graph", str(CHAIN), "-o", str(tmp_path / name))[0] == 0
        assert (tmp_path / name).read_text().startswith(first)
    code, out, _ = run(capsys, "graph", str(CHAIN))
    assert code == 0 and out.startswith("digraph memtrace {")


def test_graph_json_is_node_link_data(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "graph", str(CHAIN), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["graph"]["schema"] == "memtrace.graph/1" and data["graph"]["source"] == "labels"
    graph = nx.node_link_graph(data, edges="edges")
    assert graph.number_of_nodes() == 9 and graph.number_of_edges() == 8
    assert graph.edges["relu", "sink", 0]["buffer"] == "bfc:4"
    assert HOSTILE in graph


def test_graphml_reads_back_with_hostile_names(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "g.graphml"
    assert run(capsys, "graph", str(CHAIN), "-o", str(target))[0] == 0
    graph = nx.read_graphml(target, force_multigraph=True)
    assert HOSTILE in graph
    assert graph.number_of_edges() == 8
    assert graph.nodes["mm"]["op_type"] == "MatMul"
    assert {d["allocation_id"] for _, _, d in graph.edges(data=True) if "allocation_id" in d} == {1, 2, 3, 4, 5}


def _graphviz() -> str:
    """Graphviz's ``dot``; .ci/run installs it, so in CI its absence is a failure, not a skip."""
    return require_program("dot")


def test_dot_renders_in_graphviz_with_names_as_text(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dot = _graphviz()
    target = tmp_path / "g.dot"
    assert run(capsys, "graph", str(CHAIN), "-o", str(target))[0] == 0
    rendered = subprocess.run([dot, "-Tsvg", str(target)], capture_output=True, text=True, check=True).stdout
    # The hostile name is one node whose label reads exactly as the trace wrote it.
    assert rendered.count("bad &quot;name&quot; &lt;x&gt; \\ end</text>") == 1
    assert rendered.count('class="node"') == 9 and rendered.count('class="edge"') == 8


def test_alexnet_live_at_peak_dot_renders(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dot = _graphviz()
    target = tmp_path / "peak.dot"
    assert run(capsys, "graph", str(ALEXNET), "--live-at-peak", "GPU_0_bfc", "-o", str(target))[0] == 0
    plain = subprocess.run([dot, "-Tplain", str(target)], capture_output=True, text=True, check=True).stdout
    assert sum(line.startswith("node ") for line in plain.splitlines()) == 39
    assert sum(line.startswith("edge ") for line in plain.splitlines()) == 36


# -- names no other tool can take as they are (issue 17, item 8) ----------------------------------

LONG = "n" * 100_000  # "relu" and "sink" become two names sharing their first 100,000 characters


def _long_names_trace(tmp_path: Path) -> Path:
    text = CHAIN.read_text().replace('"relu', f'"{LONG}\\uffffa').replace("(relu)", f"({LONG}\\uffffa)")
    text = text.replace('"sink', f'"{LONG}\\uffffb').replace("(sink)", f"({LONG}\\uffffb)")
    path = tmp_path / "long.pbtxt"
    path.write_text(text)
    return path


def test_graphml_with_noncharacters_and_long_names_reads_back(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "g.graphml"
    assert run(capsys, "graph", str(_long_names_trace(tmp_path)), "-o", str(target))[0] == 0
    assert "&#65535;" not in target.read_text()
    graph = nx.read_graphml(target, force_multigraph=True)
    assert graph.number_of_nodes() == 9 and graph.number_of_edges() == 8
    assert f"{LONG}\\uffffa" in graph and f"{LONG}\\uffffb" in graph


def test_dot_cuts_long_names_below_graphviz_limit_and_keeps_them_apart(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import re

    target = tmp_path / "g.dot"
    assert run(capsys, "graph", str(_long_names_trace(tmp_path)), "-o", str(target))[0] == 0
    text = target.read_text()
    quoted = re.findall(r'"(?:[^"\\]|\\.)*"', text)
    assert max(len(q.encode()) for q in quoted) < 16_384
    node_ids = {line.split(" [", 1)[0].strip() for line in text.splitlines() if line.startswith('  "') and " -> " not in line}
    assert len(node_ids) == 9
    assert sum("(100002 characters, sha1 " in node for node in node_ids) == 2
    plain = subprocess.run([_graphviz(), "-Tplain", str(target)], capture_output=True, text=True, check=True).stdout
    assert sum(line.startswith("node ") for line in plain.splitlines()) == 9
