"""How fast the BFC model replays: one replay of N events, a smallest-limit search, and a whole default ``fit``.

    python scripts/bench_fit.py [--events 500000] [--seed 0] [--fit]

The sequence is synthetic and deterministic: a training-like pattern of long-lived weights, then
steps of activations of many sizes (256 B to 64 MiB) allocated in a forward pass and freed in
reverse, with short-lived temporaries in between. Prints CPU seconds per replay (recording every
event's statistics, and recording nothing, as the limit search does) and for each search (with
the replays it made and the events they replayed, where the version measured says). ``--fit``
also runs what ``memtrace fit`` runs on a trace without a limit (the search, the outcome under
the answer, and the four alternatives), under TF's CPU options (growth on) and GPU options
(growth off, garbage collection on), and prints the CPU time and the process's peak RSS. Run it
with ``PYTHONPATH`` set to another checkout to compare versions.
"""

from __future__ import annotations

import argparse
import resource
import time

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
    args = parser.parse_args()
    requests = training_like(args.events, args.seed)
    print(f"{len(requests):,} events, {int(requests.is_alloc.sum()):,} allocations; "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB of RSS made")
    for what, run in (("simulate (every event recorded)", lambda: simulate(requests, BFCOptions(64 << 30))),
                      ("fits (nothing recorded)", lambda: fits(requests, BFCOptions(64 << 30)))):
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
    assert min_limit(requests, BFCOptions(64 << 30)) > 0
    if args.fit:
        from memtrace.allocator.fit import fit_requests

        for name, opts in (("CPU (growth on)", BFCOptions(0, True, False)),
                           ("GPU (growth off, garbage collection on)", BFCOptions(0, False, True))):
            fresh = _copy(requests)
            start, cpu = time.perf_counter(), time.process_time()
            result = fit_requests(fresh, opts)
            print(f"fit, {name}: smallest {result.min_limit_bytes / (1 << 20):,.0f} MiB (below it every "
                  f"{result.below_step_bytes / (1 << 20):,.0f} MiB tried), alternatives "
                  f"{', '.join(f'{a.min_limit_bytes / (1 << 20):,.0f}' for a in result.alternatives)} MiB; "
                  f"{time.perf_counter() - start:.1f} s ({time.process_time() - cpu:.1f} s of CPU); peak RSS so far "
                  f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def _copy(requests: Requests) -> Requests:
    return Requests(requests.is_alloc.copy(), requests.requested_bytes.copy(), requests.frees.copy(),
                    requests.op.copy(), requests.time_ns.copy(), requests.op_names)


if __name__ == "__main__":
    main()
