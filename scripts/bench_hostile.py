"""Time and peak memory of ``memtrace summary`` on the memory bombs of issue 17 (item 3).

``python scripts/bench_hostile.py WORKDIR [--memtrace DIR] [--timeout S] [--only NAME ...]``
writes the hostile inputs into WORKDIR (about 4 GB; under /tmp, never in the repository),
then runs ``memtrace summary`` on each in a fresh process with DIR first on ``PYTHONPATH``
(default: this checkout), and prints one line per input: seconds, peak RSS in MB (from
``/usr/bin/time -v``), exit code and the first line of stderr. Run it with an old checkout's
``--memtrace`` to compare before and after. A run past ``--timeout`` is stopped and says so.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GB = 1 << 30


def _write_repeated(path: Path, head: bytes, filler: bytes, count: int, tail: bytes) -> None:
    with path.open("wb") as out:
        out.write(head)
        block = filler * (1 << 20)
        for _ in range(count // len(block)):
            out.write(block)
        out.write(tail)


_ODD_FORMS = (  # (name, a pattern, what its first match becomes)
    ("single-quotes", rb'(    node_name: )"([^"\n]*)"\n', rb"\1'\2'\n"),
    ("hex", rb"(    all_start_micros: )1700000000000000\n", rb"\g<1>0x60a24181e4000\n"),
    ("tabs", rb"\n    (all_start_micros:)", rb"\n\t\t\1"),
    ("one-line", rb"(  node_stats) \{\n    (node_name:)", rb"\1 { \2"),
    ("blank-at-end", rb"(    op_start_rel_micros: 1)\n", rb"\1 \n"),
    ("comment-after-string", rb'(GPU:0")\n', rb"\1  # the GPU\n"),
    ("adjacent-strings", rb'(    node_name: "[^"\n/]*/)', rb'\1" "'),
    ("angle-brackets", rb"(    memory) \{\n((?:      .*\n)*?)    \}\n", rb"\1 <\n\2    >\n"),
    ("list-syntax", rb"      allocation_records \{\n        alloc_micros: (\d+)\n        alloc_bytes: (-?\d+)\n      \}\n" * 2,
     rb"      allocation_records: [{alloc_micros: \1 alloc_bytes: \2}, {alloc_micros: \3 alloc_bytes: \4}]\n"),
    ("hash-in-single-quotes", rb'(    node_name: )"([^"\n]*)"\n', rb"\1'#\2'\n"),
    ("hash-in-double-quotes", rb'(    node_name: )"([^"\n]*)"\n', rb'\1"#\2" "#"  # a comment\n'),
)


def _node_lists(data: bytes) -> bytes:
    """Each device's nodes in one list: ``node_stats: [{...}, {...}]``."""
    data = data.replace(b"\n  }\n  node_stats {\n", b"\n  }, {\n")
    data = re.sub(rb"(?m)^  node_stats \{\n", b"  node_stats: [{\n", data)
    return re.sub(rb"\n  \}\n\}", b"\n  }]\n}", data)


def _before_last_node_end(line: bytes) -> Callable[[bytes], bytes]:
    """``line`` put into the last node of the trace (whose end is the file's last ``  }``)."""
    return lambda data: data[:data.rindex(b"\n  }\n") + 1] + line + data[data.rindex(b"\n  }\n") + 1:]


_FORMS_THROUGHOUT: tuple[tuple[str, Callable[[bytes], bytes]], ...] = (  # (name, the trace -> the trace so written)
    ("adjacent-strings", lambda data: re.sub(rb'(node_name: "[^"\n/]*/)', rb'\1" "', data)),
    ("angle-brackets", lambda data: re.sub(rb"(?m)^( *)\}$", rb"\1>", data.replace(b" {\n", b" <\n"))),
    ("list-syntax", lambda data: re.sub(
        rb"(?m)^( *)allocation_records \{\n\1  alloc_micros: (\d+)\n\1  alloc_bytes: (-?\d+)\n\1\}\n",
        rb"\1allocation_records: [{alloc_micros: \2 alloc_bytes: \3}]\n", data)),
    ("node-lists", _node_lists),
    ("node-per-line", lambda data: re.sub(rb"\n {4,}", b" ", data)),
    ("one-line", lambda data: re.sub(rb"\n *", b" ", data)),
    # Invalid for memtrace's schema: the error must come in bounded time and memory.
    ("unknown-field-at-end", _before_last_node_end(b"    bogus: 1\n")),
    ("extension-at-end", _before_last_node_end(b"    [ext.field]: 1\n")),
)


def make_inputs(work: Path) -> dict[str, Path]:
    """The hostile inputs (made once; kept between runs)."""
    work.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {}
    trace = work / "trace100.pbtxt"
    if not trace.exists():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_trace.py"), str(trace), "--size", "100MB"], check=True)
    files["trace-100MB"] = trace
    commented = work / "trace100-comment.pbtxt"
    if not commented.exists():
        data = trace.read_bytes()
        cut = data.index(b"  node_stats {\n") + len(b"  node_stats {\n")
        commented.write_bytes(data[:cut] + b"    # recorded on host-17, step 3\n" + data[cut:])
    files["trace-100MB+1-comment"] = commented
    # The other valid forms protobuf's printers never write, each once in the first node.
    data = None
    for form, pattern, replacement in _ODD_FORMS:
        odd = work / f"trace100-{form}.pbtxt"
        if not odd.exists():
            data = data or trace.read_bytes()
            odd.write_bytes(re.sub(pattern, replacement, data, count=1))
        files[f"trace-100MB+1-{form}"] = odd
    # The forms no printer writes, throughout a trace (the last two make it invalid).
    for form, rewrite in _FORMS_THROUGHOUT:
        odd = work / f"trace100-all-{form}.pbtxt"
        if not odd.exists():
            data = data or trace.read_bytes()
            odd.write_bytes(rewrite(data))
        files[f"trace-100MB-{form}"] = odd
    zeros = work / "zeros-1GB.gz"
    if not zeros.exists():
        with gzip.open(zeros, "wb", compresslevel=9) as out:
            block = bytes(1 << 20)
            for _ in range(1024):
                out.write(block)
    files["gzip-1MB-of-1GB-zeros"] = zeros
    node = b'dev_stats {\n  device: "/cpu:0"\n  node_stats {\n    node_name: "a"\n'
    spaces = work / "spaces-1GB.pbtxt"
    if not spaces.exists():
        _write_repeated(spaces, node + b"    all_start_micros: 1", b" ", GB, b"\n  }\n}\n")
    files["1GB-spaces-in-a-node"] = spaces
    comment = work / "comment-1GB.pbtxt"
    if not comment.exists():
        _write_repeated(comment, node + b"    # ", b"x", GB, b"\n    all_start_micros: 1\n  }\n}\n")
    files["1GB-comment-line"] = comment
    name = work / "name-8MB.pbtxt"
    if not name.exists():
        _write_repeated(name, b'dev_stats {\n  device: "/cpu:0"\n  node_stats {\n    node_name: "', b"n", 8 << 20,
                        b'"\n    all_start_micros: 1\n    memory { allocator_name: "cpu" }\n  }\n}\n')
    files["8MB-name"] = name
    files["/dev/zero"] = Path("/dev/zero")
    return files


def measure(memtrace: Path, path: Path, timeout: float) -> str:
    env = {**os.environ, "PYTHONPATH": str(memtrace)}
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "memtrace", "summary", str(path)]
    began = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False,
                              cwd=path.parent if path.is_file() else "/")  # not here: -m would import this checkout
    except subprocess.TimeoutExpired:
        return f"stopped after {timeout:.0f} s (still running)"
    seconds = time.monotonic() - began
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    said = [line for line in done.stderr.splitlines() if not line.startswith(("\t", "Command"))]
    rss_mb = int(rss.group(1)) // 1024 if rss else -1
    return f"{seconds:6.1f} s {rss_mb:6d} MB exit {done.returncode}  {(said[0] if said else '')[:110]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="where to write the inputs (under /tmp)")
    parser.add_argument("--memtrace", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a run is stopped (default 120)")
    parser.add_argument("--only", nargs="*", help="only these inputs (names as printed)")
    args = parser.parse_args()
    for label, path in make_inputs(args.work).items():
        if args.only and label not in args.only:
            continue
        print(f"{label:24s} {measure(args.memtrace, path, args.timeout)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
