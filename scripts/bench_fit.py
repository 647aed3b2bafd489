"""How fast the BFC model replays: one replay of N events, a smallest-limit search, a whole default ``fit``, the
band over the orders a run may take, and where ``oom --trace`` puts a dump's request.

    python scripts/bench_fit.py [--events 500000] [--seed 0] [--fit] [--band] [--oom]

The sequence is synthetic and deterministic: a training-like pattern of long-lived weights, then
steps of activations of many sizes (256 B to 64 MiB) allocated in a forward pass and freed in
reverse, with short-lived temporaries in between. Prints seconds per replay (recording every
event's statistics, and recording nothing, as the limit search does) and for each search (with
the replays it made and the events they replayed, where the version measured says; run it with
``PYTHONPATH`` set to another checkout to compare versions).

``--fit``: what ``memtrace fit`` runs on a trace without a limit (the search, the outcome under the
answer, and the four alternatives), under TF's CPU options (growth on) and GPU options (growth off,
garbage collection on): CPU seconds and the process's peak RSS.

``--band``: the band (``memtrace.allocator.orders``, 32 sampled orders) against a plain ``fit`` on
the fixtures' recordings (CPU seconds of the analysis, the reading left out, the best of three),
and on the synthetic sequence with its temporaries on a second thread, each step 10 ms apart.
``--oom``: where ``memtrace oom --trace`` puts the failed request of a dump (issue 36, item 10) on
a run that ends with 1,000 to 100,000 frees after its last allocation: one replay, then the state
after every event compared with the dump's at once.
"""

from __future__ import annotations

import argparse
import resource
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from memtrace.allocator.bfc import BFCOptions, Requests, fits, min_limit, search_min_limit, simulate


def training_like(events: int, seed: int) -> Requests:
    """About ``events`` events: weights, then steps of forward allocations freed in reverse, with temporaries."""
    rng = np.random.default_rng(seed)
    is_alloc: list[bool] = []
    requested: list[int] = []
    frees: list[int] = []

    def alloc(size: int) -> int:
        is_alloc.append(True)
        requested.append(size)
        frees.append(-1)
        return len(is_alloc) - 1

    def free(row: int) -> None:
        is_alloc.append(False)
        requested.append(0)
        frees.append(row)

    sizes = (2.0 ** rng.uniform(8, 26, size=400)).astype(np.int64)  # the model's tensor sizes
    for size in sizes[:100]:
        alloc(int(size))  # weights, never freed
    while len(is_alloc) < events:
        live = []
        for size in sizes[100:]:
            live.append(alloc(int(size)))
            temp = alloc(int(rng.integers(1, 1 << 16)))
            free(temp)
        for row in reversed(live):
            free(row)
    n = len(is_alloc)
    return Requests(np.array(is_alloc), np.array(requested, dtype=np.int64), np.array(frees, dtype=np.int64),
                    np.full(n, -1, dtype=np.int32), np.arange(n, dtype=np.int64), ())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fit", action="store_true", help="also a whole default fit under TF's CPU and GPU options")
    parser.add_argument("--band", action="store_true", help="also the band over the orders a run may take")
    parser.add_argument("--oom", action="store_true", help="also where oom --trace puts a dump's request")
    args = parser.parse_args()
    requests = training_like(args.events, args.seed)
    options = BFCOptions(64 << 30)
    print(f"{len(requests):,} events, {int(requests.is_alloc.sum()):,} allocations; "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB of RSS made")
    for what, run in (("simulate (every event recorded)", lambda: simulate(requests, options)),
                      ("fits (nothing recorded)", lambda: fits(requests, options))):
        start, cpu = time.perf_counter(), time.process_time()
        run()
        print(f"{what}: {time.perf_counter() - start:.2f} s ({time.process_time() - cpu:.2f} s of CPU)")
    for growth in (True, False):
        fresh = _copy(requests)  # nothing an earlier replay proved carries over
        opts = BFCOptions(64 << 30, allow_growth=growth)
        start, cpu = time.perf_counter(), time.process_time()
        search = search_min_limit(fresh, opts)
        replays = f", {search.replays} replays of {search.replayed_events:,} events" if hasattr(search, "replays") else ""
        print(f"search_min_limit (allow_growth {'on' if growth else 'off'}): {search.limit_bytes / (1 << 20):,.0f} MiB, "
              f"{len(search.tried)} limits{replays}, below_step {search.below_step}, "
              f"{time.perf_counter() - start:.2f} s ({time.process_time() - cpu:.2f} s of CPU)")
    assert min_limit(requests, options) > 0
    if args.fit:
        bench_fit(requests)
    if args.band:
        bench_band(requests)
    if args.oom:
        bench_oom()


def bench_fit(requests: Requests) -> None:
    from memtrace.allocator.fit import fit_requests

    for name, opts in (("CPU (growth on)", BFCOptions(0, True, False)),
                       ("GPU (growth off, garbage collection on)", BFCOptions(0, False, True))):
        fresh = _copy(requests)
        start, cpu = time.perf_counter(), time.process_time()
        result = fit_requests(fresh, opts, limit_given=False)
        print(f"fit, {name}: smallest {(result.min_limit_bytes or 0) / (1 << 20):,.0f} MiB (below it every "
              f"{result.below_step_bytes / (1 << 20):,.0f} MiB tried), alternatives "
              f"{', '.join(f'{a.min_limit_bytes / (1 << 20):,.0f}' for a in result.alternatives)} MiB; "
              f"{time.perf_counter() - start:.1f} s ({time.process_time() - cpu:.1f} s of CPU); peak RSS so far "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def _copy(requests: Requests) -> Requests:
    return Requests(requests.is_alloc.copy(), requests.requested_bytes.copy(), requests.frees.copy(),
                    requests.op.copy(), requests.time_ns.copy(), requests.op_names)


def _cpu(run: Callable[[], object], times: int = 3) -> float:
    """The best of ``times`` runs, in CPU seconds of this process."""
    best = float("inf")
    for _ in range(times):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


FIXTURE_PROFILES = ("fit/cnn", "fit/lstm", "fit/transformer", "fit/eager", "orders/default.r1", "orders/steady.r1",
                    "batches/cnn_b32", "gpu-h200/mlp_930")


def bench_band(requests: Requests) -> None:
    import memtrace
    from memtrace.allocator.fit import fit
    from memtrace.allocator.orders import DEFAULT_ORDERS, Recording, order_band, order_graph

    root = Path(__file__).resolve().parent.parent / "fixtures"
    print(f"\nthe band ({DEFAULT_ORDERS} orders) against a plain fit, CPU seconds, best of 3:")
    for name in FIXTURE_PROFILES:
        path = root / f"{name}.xplane.pb.gz"
        if not path.exists():
            continue
        trace = memtrace.load(path)
        allocator = "GPU_0_bfc" if "GPU_0_bfc" in trace.allocators else trace.allocators[0]
        plain = _cpu(lambda: fit(trace, allocator, orders=0))  # noqa: B023 - called at once
        band = _cpu(lambda: fit(trace, allocator))  # noqa: B023
        print(f"  {name}: fit {plain:.2f} s, fit with the band {band:.2f} s: {band / plain:.2f}x")
    # The synthetic sequence with its temporaries on a second thread, each step 10 ms after the one before.
    threads = np.zeros(len(requests), dtype=np.int64)
    small = requests.requested_bytes < (1 << 16)
    threads[small & requests.is_alloc] = 1
    frees = np.flatnonzero(~requests.is_alloc)
    threads[frees] = threads[requests.frees[frees]]
    timed = Requests(requests.is_alloc, requests.requested_bytes, requests.frees, requests.op,
                     np.arange(len(requests), dtype=np.int64) * 20_000, requests.op_names)
    options = BFCOptions(0)
    graph_start = time.process_time()
    graph = order_graph(timed, threads)
    graph_seconds = time.process_time() - graph_start
    start = time.process_time()
    search = search_min_limit(timed, options)
    plain = time.process_time() - start
    start = time.process_time()
    band = order_band([Recording("synthetic", graph, min_limit_bytes=search.limit_bytes)], options)
    seconds = time.process_time() - start
    print(f"  synthetic, {len(timed):,} events on 2 threads, {graph.units:,} units: the partial order "
          f"{graph_seconds:.2f} s; min_limit {plain:.2f} s; the band {seconds:.2f} s "
          f"({band.never_fits_below_bytes >> 20:,} / {band.first_fit_bytes >> 20:,} / "
          f"{band.always_fits_bytes >> 20:,} MiB over {len(band.orders)} orders)")


def bench_oom() -> None:
    from memtrace.allocator.dump import OomDump, Stats
    from memtrace.allocator.oom import analyse
    from memtrace.allocator.oom_fit import failed_request_place

    print("\noom --trace: where the dump's request goes, a run ending with N frees after its last allocation:")
    for frees in (1_000, 2_000, 4_000, 8_000, 100_000):
        events: list[tuple[str, int]] = [("a", 1024) for _ in range(frees)]
        events += [("f", row) for row in range(frees)]
        requests = Requests.from_events(events)
        options = BFCOptions(64 << 30)
        # a dump whose bytes in use no state after the last allocation has: every place is looked at
        dump = OomDump(path="bench", source="log", line=None, allocator=None, request_bytes=1 << 20,
                       limit_bytes=options.limit_bytes, stats=Stats(in_use_bytes=300))
        event = analyse(dump)
        start = time.process_time()
        replay = simulate(requests, options)
        place = failed_request_place(requests, replay, event)
        print(f"  {frees:,} frees: {time.process_time() - start:.3f} s (placed: {place})")


if __name__ == "__main__":
    main()
