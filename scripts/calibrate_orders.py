"""The band over the orders a run may take, held to the runs themselves: the calibration of docs/fit.md.

    python scripts/calibrate_orders.py [--orders 16] [--window-ms 10] [--json OUT] [--only NAME]

For each program recorded with its own ladder of real runs (TensorFlow's or XLA's own outcome,
several runs per limit where the runs disagree), it makes the band ``memtrace fit`` makes: from
each recording alone and from all of a program's recordings at once, with the options ``fit``
takes by default (the runtime's, the self-check's region order). Then, at every limit of the
ladder, every sampled order is replayed there (with TF's retry, as the band's own replays are),
beside the share of real runs that fitted.

Two questions per band, printed as a verdict:

- **contains**: does every limit at which real runs disagreed (some fit, some not) lie inside the
  band (``never_fits_below_bytes <= limit < always_fits_bytes``)?
- **narrow**: how many limits at which the runs agreed lie inside it anyway (the band is wider
  than the runs showed there)?
- **contradicted**: limits where every run fitted below the band, or every run ran out at or
  above its top: there the band is wrong, not merely wide (a recording whose run took other
  requests than the ladder's runs: one recording cannot know).

The ladders: ``fixtures/orders/ladders.json`` (the Keras CNN with TensorFlow's default threads and
oneDNN, and with one thread and oneDNN off; ``scripts/record_orders.py``), ``fixtures/fit/*.json``
(one run per limit, programs on one thread), ``fixtures/batches/ladders.json`` (per batch size,
one run per limit), and the H200 MLP's ladder, which ``fixtures/gpu-h200/README.md`` gives in words
(written out below, with its source).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import memtrace
from memtrace.allocator.fit import fit_recordings
from memtrace.allocator.orders import DEFAULT_ORDERS, DEFAULT_WINDOW_NS

MIB = 1 << 20
FIXTURES = ROOT / "fixtures"

# fixtures/gpu-h200/README.md: "The same program run under one limit several times (outcome per run):
# 930 MiB fit 4 of 6 times, 936 MiB 4 of 6, 944 MiB 3 of 5, 956 MiB 5 of 6, 962 MiB 5 of 5; 916 MiB and
# below never." How many runs below 916 MiB it does not say: one run each is taken for 916 and 900.
# The two single recordings under a limit are runs too: mlp_930 fitted at 930, mlp_928 ran out at 928.
GPU_LADDER = [(900, 1, 0), (916, 1, 0), (928, 1, 0), (930, 7, 5), (936, 6, 4), (944, 5, 3), (956, 6, 5), (962, 5, 5)]


@dataclass
class Program:
    """A program, its recordings (from the allocator's birth) and its ladder: (limit MiB, runs, runs that fitted)."""

    name: str
    recordings: list[Path]
    ladder: list[tuple[int, int, int]]
    allocator: str | None = None
    note: str = ""


@dataclass
class Band:
    label: str
    own_mib: list[int]
    never_mib: int
    first_mib: int
    always_mib: int
    orders: int
    shares: dict[int, float] = field(default_factory=dict)  # limit MiB -> share of sampled orders that fit
    seconds: float = 0.0


def programs() -> Iterator[Program]:
    ladders = FIXTURES / "orders" / "ladders.json"
    if ladders.exists():
        document = json.loads(ladders.read_text())
        for config, data in document["configs"].items():
            files = [FIXTURES / "orders" / r["file"] for r in data["recordings"]]
            ladder = [(step["limit_mib"], step["runs"], step["completed"]) for step in data["ladder"]]
            yield Program(f"cnn-{config}", files, ladder, note=str(data["configuration"].get("threads")))
    for name in ("cnn", "lstm", "transformer", "eager"):
        evidence = json.loads((FIXTURES / "fit" / f"{name}.json").read_text())
        ladder = [(run["limit_mib"], 1, int(run["outcome"] == "completed")) for run in evidence["ladder"]]
        yield Program(f"fit-{name}", [FIXTURES / "fit" / f"{name}.xplane.pb.gz"], ladder, note="one thread")
    batches = json.loads((FIXTURES / "batches" / "ladders.json").read_text())
    for model in ("cnn", "lstm"):
        for batch in (16, 32, 48, 64):
            runs = [r for r in batches["runs"] if r.get("model") == model and r.get("batch") == batch and "limit_mib" in r]
            ladder = sorted({(r["limit_mib"], 1, int(r["completed"])) for r in runs})
            files = [FIXTURES / "batches" / f"{model}_b{batch}.xplane.pb.gz"]
            if (model, batch) == ("lstm", 48):
                files.append(FIXTURES / "batches" / "lstm_b48_rerun.xplane.pb.gz")
            yield Program(f"batches-{model}-b{batch}", files, ladder, note="one thread")
    gpu = FIXTURES / "gpu-h200"
    if gpu.exists():
        files = [gpu / "mlp_930.xplane.pb.gz"] + [gpu / "orders" / f"mlp_o{i}.xplane.pb.gz" for i in range(6)]
        yield Program("gpu-mlp", files, GPU_LADDER, allocator="GPU_0_bfc", note="XLA (JAX 0.11.2), H200")


def band(label: str, traces: list[Any], allocator: str, limits: list[int], count: int, window_ns: int) -> Band:
    """fit's band over ``traces``, every sampled order also replayed at each of ``limits`` (MiB)."""
    started = time.perf_counter()
    result = fit_recordings(traces, allocator, alternatives=False, orders=count, window_ns=window_ns,
                            at_limits=[limit * MIB for limit in limits])
    b = result.band
    assert b is not None
    n = len(b.orders)
    shares = {limit // MIB: fitting / n for limit, fitting in b.fitting_at}
    return Band(label, [r.min_limit_bytes // MIB for r in result.recordings], b.never_fits_below_bytes // MIB,
                b.first_fit_bytes // MIB, b.always_fits_bytes // MIB, n, shares, time.perf_counter() - started)


def verdict(ladder: list[tuple[int, int, int]], b: Band) -> tuple[list[int], list[int], list[int], list[int]]:
    """(limits where runs disagreed, those of them outside the band, limits where runs agreed but inside it,
    limits where the runs agreed against the band: all fitted below it, or all ran out at or above its top)."""
    disagreed = [limit for limit, runs, ok in ladder if 0 < ok < runs]
    outside = [limit for limit in disagreed if not b.never_mib <= limit < b.always_mib]
    agreed_inside = [limit for limit, runs, ok in ladder if ok in (0, runs) and b.never_mib <= limit < b.always_mib]
    against = [limit for limit, runs, ok in ladder
               if (ok == runs and limit < b.never_mib) or (ok == 0 and limit >= b.always_mib)]
    return disagreed, outside, agreed_inside, against


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=DEFAULT_ORDERS)
    parser.add_argument("--window-ms", type=float, default=DEFAULT_WINDOW_NS / 1e6)
    parser.add_argument("--only", help="only the programs whose name contains this")
    parser.add_argument("--json", help="write the numbers to this file too")
    args = parser.parse_args()
    window_ns = round(args.window_ms * 1e6)
    found: list[dict[str, Any]] = []
    for program in programs():
        if args.only and args.only not in program.name:
            continue
        traces = [memtrace.load(path) for path in program.recordings]
        allocator = program.allocator or traces[0].allocators[0]
        limits = [limit for limit, _, _ in program.ladder]
        bands = [band(path.name, [trace], allocator, limits, args.orders, window_ns)
                 for path, trace in zip(program.recordings, traces)]
        if len(traces) > 1:
            bands.append(band("all", traces, allocator, limits, args.orders, window_ns))
        print(f"\n## {program.name} ({program.note}; {len(traces)} recording{'s' if len(traces) > 1 else ''}, "
              f"allocator {allocator})\n")
        print("| band from | own smallest limit | never below | first fit | always from | orders | disagreed "
              "limits outside | agreed limits inside | contradicted | seconds |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for b in bands:
            disagreed, outside, inside, against = verdict(program.ladder, b)
            print(f"| {b.label} | {', '.join(map(str, b.own_mib))} | {b.never_mib} | {b.first_mib} | {b.always_mib} | "
                  f"{b.orders} | {len(outside)} of {len(disagreed)}{' ' + str(outside) if outside else ''} | "
                  f"{len(inside)}{' ' + str(inside) if inside else ''} | {against or 'none'} | {b.seconds:.1f} |")
        print("\n| limit (MiB) | runs | fitted | share | " + " | ".join(b.label for b in bands) + " |")
        print("|---|---|---|---|" + "---|" * len(bands))
        for limit, runs, ok in program.ladder:
            print(f"| {limit} | {runs} | {ok} | {ok / runs:.2f} | "
                  + " | ".join(f"{b.shares[limit]:.2f}" for b in bands) + " |")
        found.append({"program": program.name, "note": program.note, "allocator": allocator,
                      "recordings": [str(p.relative_to(ROOT)) for p in program.recordings],
                      "ladder": [{"limit_mib": limit, "runs": runs, "fitted": ok} for limit, runs, ok in program.ladder],
                      "bands": [{"from": b.label, "own_min_limit_mib": b.own_mib, "never_fits_below_mib": b.never_mib,
                                 "first_fit_mib": b.first_mib, "always_fits_mib": b.always_mib, "orders": b.orders,
                                 "shares": {str(k): v for k, v in b.shares.items()}, "seconds": round(b.seconds, 2),
                                 "disagreed_outside": verdict(program.ladder, b)[1],
                                 "agreed_inside": verdict(program.ladder, b)[2],
                                 "contradicted": verdict(program.ladder, b)[3]} for b in bands]})
        sys.stdout.flush()
    if args.json:
        Path(args.json).write_text(json.dumps({"schema": "memtrace.orders-calibration/1", "orders": args.orders,
                                               "window_ns": window_ns, "programs": found}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
