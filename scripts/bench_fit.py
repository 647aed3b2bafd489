"""How fast the BFC model replays: one replay of N events, and a smallest-limit search.

    python scripts/bench_fit.py [--events 500000] [--seed 0]

The sequence is synthetic and deterministic: a training-like pattern of long-lived weights, then
steps of activations of many sizes (256 B to 64 MiB) allocated in a forward pass and freed in
reverse, with short-lived temporaries in between. Prints seconds per replay (recording every
event's statistics, and recording nothing, as the limit search does) and for ``min_limit``.
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()
    requests = training_like(args.events, args.seed)
    options = BFCOptions(64 << 30)
    print(f"{len(requests):,} events, {int(requests.is_alloc.sum()):,} allocations")
    for what, run in (("simulate (every event recorded)", lambda: simulate(requests, options)),
                      ("fits (nothing recorded)", lambda: fits(requests, options))):
        start, cpu = time.perf_counter(), time.process_time()
        run()
        print(f"{what}: {time.perf_counter() - start:.2f} s ({time.process_time() - cpu:.2f} s of CPU)")
    for growth in (True, False):
        opts = BFCOptions(64 << 30, allow_growth=growth)
        start, cpu = time.perf_counter(), time.process_time()
        search = search_min_limit(requests, opts)
        print(f"min_limit (allow_growth {'on' if growth else 'off'}): {search.limit_bytes / (1 << 20):,.0f} MiB, "
              f"{len(search.tried)} limits, {time.perf_counter() - start:.2f} s ({time.process_time() - cpu:.2f} s of CPU)")
    assert min_limit(requests, options) > 0


if __name__ == "__main__":
    main()
