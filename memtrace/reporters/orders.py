"""The band over the orders a run may take (``memtrace.allocator.orders.OrderBand``), as text and JSON.

Shared by the answers that carry a band (``memtrace fit``'s; the batch predictions may carry one too):
``band_json`` is the ``band`` object of their JSON, ``render_band`` the lines of their text.
"""

from __future__ import annotations

import os
from typing import IO, Any

from ..allocator.orders import OrderBand, OrdersUnderLimit
from ..units import MIB, format_bytes, format_us, plural
from .common import clean


def band_json(b: OrderBand) -> dict[str, Any]:
    """``band``: the limits over the sampled orders (see docs/fit.md, "The orders a run may take")."""
    return {
        "orders": len(b.orders),
        "orders_asked": b.asked_orders,
        "recordings": list(b.recordings),
        "recorded_min_limit_bytes": list(b.recorded_limits),
        "never_fits_below_bytes": b.never_fits_below_bytes,
        "first_fit_bytes": b.first_fit_bytes,
        "always_fits_bytes": b.always_fits_bytes,
        "narrow": b.narrow,
        "fixed": b.fixed,
        "window_ns": b.window_ns,
        "seed": b.seed,
        "shares": [{"limit_bytes": limit, "fitting_orders": count} for limit, count in b.steps()],
        "order_min_limits_bytes": [o.min_limit_bytes for o in b.orders],
        "order_recordings": [o.recording for o in b.orders],
        "limit_bytes": b.limit_bytes,
        "fitting_orders_at_limit": b.fitting_at_limit,
        "fits_every_order": b.all_fit,
    }


def orders_under_json(u: OrdersUnderLimit) -> dict[str, Any]:
    return {"recordings": list(u.recordings), "limit_bytes": u.limit_bytes, "fitting_orders": u.fitting,
            "orders": u.sampled, "orders_asked": u.asked_orders, "fixed": u.fixed, "window_ns": u.window_ns,
            "seed": u.seed}


def render_orders_under(u: OrdersUnderLimit, out: IO[str], indent: str = "  ") -> None:
    """The share of sampled orders that run under the limit, each replayed there once (no band's edges)."""
    n = u.sampled
    if u.fixed:
        what = ("the recording's own order" if len(u.recordings) == 1 else
                f"each of the {len(u.recordings)} recordings' own orders") + " (no other order is possible)"
    else:
        source = "this one recording" if len(u.recordings) == 1 else f"{len(u.recordings)} recordings"
        what = (f"{plural(n, 'order')} sampled from {source} (the recorded and others drawn within a "
                f"{format_us(u.window_ns)} scheduling window, seed {u.seed}), each replayed once under the limit")
    out.write(f"{indent}the orders a run may take: {what}\n")
    if u.asked_orders > n:
        out.write(f"{indent}  {n:,} of the {u.asked_orders:,} orders asked for: replaying more would take longer than "
                  "the band's budget\n")
    out.write(f"{indent}  {_share(u.fitting, n, u.limit_bytes)}\n")


def _mib(value: int) -> str:
    if value % MIB == 0:
        return f"{value // MIB:,} MiB"
    return f"{format_bytes(value)} ({value:,} bytes)"


def _sampled(b: OrderBand) -> str:
    """How many orders, from what, within which window."""
    n = len(b.orders)
    window = f"within a {format_us(b.window_ns)} scheduling window"
    if b.fixed:
        return ("the recording's own order" if len(b.recordings) == 1 else
                f"each of the {len(b.recordings)} recordings' own orders") + " (no other order is possible)"
    if len(b.recordings) == 1:
        return (f"{plural(n, 'order')} sampled from this one recording (its own and {n - 1:,} drawn {window}, "
                f"seed {b.seed}): an estimate from one recording" if n > 1 else
                "the recording's own order (no other order was drawn)")
    each = sorted({sum(1 for o in b.orders if o.recording == r) for r in range(len(b.recordings))})
    per = f"{each[0]:,}" if len(each) == 1 else "/".join(f"{c:,}" for c in each)
    return (f"{plural(n, 'order')} sampled from {len(b.recordings)} recordings ({per} from each: its own and others "
            f"drawn {window}, seed {b.seed})")


def render_band(b: OrderBand, out: IO[str], indent: str = "  ") -> None:
    """The band in a few lines: how it was made, its edges, the share of orders between them, under the limit."""
    n = len(b.orders)
    out.write(f"{indent}the orders a run may take: {_sampled(b)}\n")
    inner = indent + "  "
    if b.asked_orders > n:
        out.write(f"{inner}{n:,} of the {b.asked_orders:,} orders asked for: replaying more would take longer than "
                  "the band's budget (a long recording with much to reorder)\n")
    if b.fixed:
        needs = (f"it needs {_mib(b.always_fits_bytes)}" if b.narrow else
                 f"they need {_mib(b.first_fit_bytes)} to {_mib(b.always_fits_bytes)}")
        out.write(f"{inner}every event follows the one before it on its thread or the data it frees, and the threads "
                  f"hand over to each other: a recorded order is the only one its threads allow; {needs}\n")
    elif b.narrow:
        out.write(f"{inner}every sampled order needs {_mib(b.always_fits_bytes)}: a narrow band (the order leaves "
                  "little to timing: one thread, or threads that hand over to each other)\n")
    else:
        out.write(f"{inner}always fits from {_mib(b.always_fits_bytes)}: every sampled order runs there and above\n")
        steps = [(limit, count) for limit, count in b.steps() if 0 < count < n]
        if steps:
            shown = ", ".join(f"{_mib(limit)} {count}/{n}" for limit, count in steps[:8])
            more = f" (and {len(steps) - 8} more steps)" if len(steps) > 8 else ""
            out.write(f"{inner}between, the share of sampled orders that run: {shown}{more}\n")
        if b.never_fits_below_bytes < b.first_fit_bytes:
            out.write(f"{inner}never fits below {_mib(b.never_fits_below_bytes)}: the fewest bytes a sampled order "
                      f"holds at once; the sampled orders replayed run from {_mib(b.first_fit_bytes)}, but runs whose "
                      "timing differs (TF's retry lets a request wait for other threads' frees) have fitted below "
                      "every replayed order\n")
        else:
            out.write(f"{inner}never fits below {_mib(b.never_fits_below_bytes)}: no sampled order runs there\n")
    if len(b.recordings) > 1:
        limits = b.recorded_limits
        spread = max(limits) - min(limits)
        out.write(f"{inner}each recording's own order needs: " + ", ".join(
            f"{_mib(limit)} ({clean(os.path.basename(path))})" for path, limit in zip(b.recordings, limits))
            + f"; spread {_mib(spread) if spread else 'none'}\n")
    if b.limit_bytes is not None and b.fitting_at_limit is not None:
        out.write(f"{inner}{_share(b.fitting_at_limit, n, b.limit_bytes)}\n")


def _share(k: int, n: int, limit: int) -> str:
    """``k/n sampled orders run under LIMIT`` and what that means for the limit."""
    share = f"{k}/{n} sampled orders run under {_mib(limit)}"
    if k == n:
        return f"{share}: every one"
    if k == 0:
        return f"{share}: none; it does NOT fit"
    return f"{share} ({100 * k / n:.0f}%): a run may run out of memory; it does NOT fit every order"
