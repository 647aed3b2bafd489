"""Sizes as people write them, both ways."""

from __future__ import annotations

import pytest

from memtrace.errors import UsageError
from memtrace.units import format_bytes, format_us, parse_size


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
