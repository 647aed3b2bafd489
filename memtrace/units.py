"""Sizes and times as people read and write them.

``format_bytes(1325898496)`` -> ``"1.23 GiB"``; ``parse_size("1.5GiB")`` -> 1610612736. Decimal
suffixes (KB, MB, GB) are powers of 10 and binary ones (KiB, MiB, GiB) powers of 2, as the
IEC and SI define them. ``parse_percent("5%")`` -> 0.05; ``format_percent(0.05)`` -> ``"5%"``.
"""

from __future__ import annotations

import re

from .errors import UsageError

_BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_FACTORS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3, "t": 1000**4, "tb": 1000**4,
    "p": 1000**5, "pb": 1000**5,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "pib": 1024**5,
}
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30
MAX_SIZE = (1 << 63) - 1  # the largest size a trace can hold (int64)
MAX_PERCENT = 1e9  # far beyond any real limit, and finite
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*$")
_PERCENT = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*%\s*$")


def format_bytes(value: int) -> str:
    """A size in binary units with three significant digits, e.g. ``"73.5 MiB"``; bytes stay exact."""
    sign = "-" if value < 0 else ""
    size = float(abs(value))
    for unit in _BINARY:
        if size < 1024 or unit == _BINARY[-1]:
            if unit == "B":
                return f"{sign}{int(size)} B"
            return f"{sign}{size:.3g} {unit}" if size < 100 else f"{sign}{size:.0f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def parse_size(text: str) -> int:
    """``"1234"``, ``"300MB"`` (10^6), ``"1.5GiB"`` (2^30), ``"64KiB"`` -> bytes; UsageError otherwise."""
    if text.strip().startswith("-"):
        raise UsageError(f"not a size: {text!r} (a size is not negative)")
    match = _SIZE.match(text)
    factor = _FACTORS.get(match.group(2).lower()) if match else None
    if match is None or factor is None:
        raise UsageError(f"not a size: {text!r} (write e.g. 1234, 300MB, 64KiB, 1.5GiB)")
    value = float(match.group(1)) * factor
    if not value <= MAX_SIZE:  # also inf, from a number of hundreds of digits
        raise UsageError(f"size too large: {_shorten(text)} (at most {MAX_SIZE} bytes)")
    return round(value)


def parse_percent(text: str) -> float:
    """``"5%"`` -> 0.05, ``"0.5 %"`` -> 0.005; a number without ``%`` is a UsageError (5 or 0.05?)."""
    if text.strip().startswith("-"):
        raise UsageError(f"not a percentage: {text!r} (a limit is not negative)")
    match = _PERCENT.match(text)
    if match is None:
        raise UsageError(f"not a percentage: {text!r} (write e.g. 5%, 0.5%, 120%)")
    value = float(match.group(1))
    if not value <= MAX_PERCENT:  # also inf, which would pass every check and is not JSON
        raise UsageError(f"percentage too large: {_shorten(text)} (at most {MAX_PERCENT:.0f}%)")
    return value / 100


def _shorten(text: str) -> str:
    """A value for an error message: at most 40 characters of it."""
    text = text.strip()
    return repr(text) if len(text) <= 40 else repr(text[:20] + "..." + text[-8:]) + f" ({len(text)} characters)"


def format_percent(fraction: float) -> str:
    """A fraction as a percentage with three significant digits: 0.05 -> ``"5%"``, 0.8911 -> ``"89.1%"``."""
    value = 100 * fraction
    if value != 0 and abs(value) < 0.01:
        return f"{'-' if value < 0 else ''}<0.01%"
    return f"{value:.0f}%" if abs(value) >= 100 else f"{value:.3g}%"


def format_us(value_ns: int) -> str:
    """A duration in the unit that reads best: ``"850 us"``, ``"12.3 ms"``, ``"1.25 s"``."""
    us = value_ns / 1000
    if abs(us) < 1000:
        return f"{us:.0f} us" if us == int(us) else f"{us:.3g} us"
    if abs(us) < 1_000_000:
        return f"{us / 1000:.3g} ms"
    return f"{us / 1_000_000:.3g} s"


def plural(count: int, noun: str) -> str:
    """``plural(1, "allocation")`` -> ``"1 allocation"``, ``plural(3, "allocation")`` -> ``"3 allocations"``."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


_DECIMAL_NAMES = {"k": "kilo", "m": "mega", "g": "giga", "t": "tera"}


def decimal_note(text: str) -> str | None:
    """For a size written with a decimal unit (``1.3G``, ``300MB``), a note that says so and gives
    the binary spelling; None for bytes and binary units. ``G`` alone is easily meant as GiB."""
    match = _SIZE.match(text) if isinstance(text, str) else None
    if match is None:
        return None
    unit = match.group(2)
    if unit.lower() not in ("k", "kb", "m", "mb", "g", "gb", "t", "tb"):
        return None
    binary = unit[0].upper() + "iB"
    return (f"{text.strip()} is decimal ({unit} = 10^{3 * ('kmgt'.index(unit[0].lower()) + 1)} bytes): "
            f"{parse_size(text):,} B; write {match.group(1)}{binary} for binary (2^{10 * ('kmgt'.index(unit[0].lower()) + 1)})")
