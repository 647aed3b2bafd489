"""Sizes as people write them, both ways."""

from __future__ import annotations

import pytest

from memtrace.errors import UsageError
from memtrace.units import format_bytes, format_percent, format_us, parse_percent, parse_size


@pytest.mark.parametrize(
    ("text", "value"),
    [("1234", 1234), ("300MB", 300_000_000), ("1.5GiB", 1_610_612_736), ("64KiB", 65536), ("2 kb", 2000), (".5MiB", 524288)],
)
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["lots", "", "1.2.3GB", "5XB", "-3"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_size(text)


@pytest.mark.parametrize(
    ("value", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (86954240, "82.9 MiB"), (1325898496, "1.23 GiB"), (-2048, "-2 KiB"),
     (500 * 1024**2, "500 MiB")],
)
def test_format_bytes(value: int, text: str) -> None:
    assert format_bytes(value) == text


def test_format_us() -> None:
    assert format_us(850_000) == "850 us"
    assert format_us(12_300_000) == "12.3 ms"
    assert format_us(1_250_000_000) == "1.25 s"


@pytest.mark.parametrize(("text", "value"), [("5%", 0.05), ("0.5 %", 0.005), ("120%", 1.2), (".5%", 0.005), ("0%", 0.0)])
def test_parse_percent(text: str, value: float) -> None:
    assert parse_percent(text) == pytest.approx(value, rel=0, abs=1e-15)


@pytest.mark.parametrize("text", ["5", "0.05", "lots%", "-5%", "5%%", ""])
def test_parse_percent_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="not a percentage"):
        parse_percent(text)


@pytest.mark.parametrize(
    ("fraction", "text"), [(0.05, "5%"), (0.891248, "89.1%"), (0.0, "0%"), (12.345, "1234%"), (0.00001, "<0.01%"), (-0.5, "-50%")]
)
def test_format_percent(fraction: float, text: str) -> None:
    assert format_percent(fraction) == text
