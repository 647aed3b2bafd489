"""How each program here ends: one ``RESULT {json}`` line with its outcome and the allocator's own counters
(``memory_stats()``: ``bytes_limit`` is the pool XLA made, ``peak_bytes_in_use`` the most it held), and its exit
code (0 ran, 3 XLA ran out of memory, 1 anything else). The programs import it from their own folder (``memtrace
run`` puts a script's folder first on ``sys.path``, as ``python SCRIPT`` does)."""

import json
from collections.abc import Callable

import jax


def run(name: str, program: Callable[[], None]) -> int:
    status, error = "ok", ""
    try:
        program()
    except Exception as exc:  # noqa: BLE001 - XLA's RESOURCE_EXHAUSTED, or any other failure: said in RESULT
        status, error = ("oom" if "RESOURCE_EXHAUSTED" in str(exc) else "error"), str(exc).splitlines()[0][:300]
    stats = jax.devices()[0].memory_stats() or {}
    print("RESULT " + json.dumps({"prog": name, "status": status, "error": error, "stats": stats}), flush=True)
    return {"ok": 0, "oom": 3}.get(status, 1)
