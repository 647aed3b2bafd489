"""The red-team pass of issue 36 as a test: ``fit`` and ``check --fits`` on hostile sizes and options.

Each run is one ``fit`` (or ``check --fits``, or a budget file's ``fits``) on a small hand-made profile
(from the allocator's birth on CPU; a GPU allocator whose garbage collection gives a region back; a
pinned host allocator holding 20 GiB; events whose recorded limit wraps past int64; one 9 TiB request;
an op named with terminal controls), with sizes and options drawn from values people and scripts
write: zero in every spelling, huge, negative, fractional, beyond int64 or the model's 8 TiB, and
garbage. Fixed seed, bounded count: the same 240 runs every time (MEMTRACE_FUZZ_SEED=N explores
others), about 10 s. Every run must end in exit 0, 1 or 2; exit 2 with exactly one line on stderr;
``--json`` strict JSON; no traceback; and a limit of 0 bytes never "fits" (exit 0). The API's
``Trace.fit`` and ``assert_fits`` take the same values (60 calls): a result, an AssertionError or a
UsageError, never another exception.

Sizes go as ``--limit=VALUE``: ``--limit -5MiB`` (a value argparse takes for an option) is issue 35's.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

import memtrace
import memtrace.testing
from memtrace.cli import main
from memtrace.errors import UsageError
from memtrace.units import parse_size

from .memory_profiles import Event, write_profile

SEED = int(os.environ.get("MEMTRACE_FUZZ_SEED", "36"))
RUNS = 240
API_CALLS = 60
MIB, GIB, TIB = 1 << 20, 1 << 30, 1 << 40
BASE = 0x7F00_0000_0000
F0 = 2 * MIB

# (events, allocator, bytes_available per event or None)
PROFILES: dict[str, tuple[list[Event], str, Any]] = {
    "birth": ([(True, 1000, 1024, BASE, 1024, 0.0, "a"), (True, 2000, 2048, BASE + 1024, 3072, 0.0, "b"),
               (False, 1000, 1024, BASE, 2048, float(f"{1024 / (F0 - 2048):.6g}"), ""),
               (True, 512, 512, BASE, 2560, float(f"{512 / (F0 - 2560):.6g}"), "c")], "bfc_cpu_allocator_for_gpu", None),
    "gc": ([(True, 3 * MIB // 2, 2 * MIB, BASE, 2 * MIB, 0.0, "first"), (False, 0, 2 * MIB, BASE, 0, 0.0, ""),
            (True, 5 * MIB, 5 * MIB, BASE + 8 * MIB, 5 * MIB, 0.0, "big")], "GPU_0_bfc", None),
    "host": ([(True, 20 * GIB, 20 * GIB, BASE, 20 * GIB, 0.0, "batches")], "cuda_host_bfc", None),
    "wraps": ([(True, 1000, 1024, BASE, 1024, 0.0, "a")], "bfc_cpu_allocator_for_gpu", lambda used: (1 << 63) - used),
    "huge": ([(True, 9 * TIB, 9 * TIB, BASE, 9 * TIB, 0.0, "huge")], "bfc_cpu_allocator_for_gpu", None),
    "hostile": ([(True, 4 * MIB, 4 * MIB, BASE, 4 * MIB, 0.0, "evil\x1b[2J\x07\rPASS\nok")], "bfc_cpu_allocator_for_gpu",
                None),
}
DEVICE = {"bfc_cpu_allocator_for_gpu": "CPU:0", "GPU_0_bfc": "GPU_0_bfc", "cuda_host_bfc": "cuda_host_bfc"}
SIZES = ["0", "0B", "0.4B", "0.0GiB", ".0", "0.5", "1", "1B", "255", "256", "1000", "1KiB", "1MiB", "6MiB", "1.5GiB",
         ".5GiB", "16GB", "16GiB", "8TiB", "8796093022208", "8796093022209", "9TiB", "9223372036854775807",
         "9223372036854775808", "99999999999999999999", "9" * 400, "1e9", "-1", "-0", "-5MiB", "-0.5", "inf", "nan",
         "GiB", "", " ", "12 XB", "0x10", "1_000", "\uff11\uff12", "\u00b2", "1.5.5", "5 MiB", "5mib", "1PiB"]
FRACTIONS = ["0", "1", "0.5", "1e-300", "-0", "-0.1", "1.0000001", "nan", "inf", "-inf", "1e309", "x", ""]
CAPABILITIES = ["8.0", "7.5", "9", "0", "999.999", "1000", "eight", "", "8.0.1", "-1"]
OUTCOMES: list[tuple[str, int]] = []


def _strict_json(text: str) -> None:
    def refuse(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")

    json.loads(text, parse_constant=refuse)


def _zero(text: str) -> bool:
    """Whether a size as written reads as 0 bytes."""
    try:
        return parse_size(text) == 0
    except UsageError:
        return False


def _case(rng: random.Random) -> tuple[str, list[str], bool]:
    """(profile, the argv after the trace, whether it asks about a limit of 0 bytes)."""
    name = rng.choice(sorted(PROFILES))
    allocator = PROFILES[name][1]
    kind = rng.random()
    zero = False
    if kind < 0.15:  # check --fits DEVICE=SIZE
        size = rng.choice(SIZES)
        zero = _zero(size)
        return name, ["check", f"--fits={DEVICE[allocator]}={size}"] + (["--json"] if rng.random() < 0.5 else []), zero
    if kind < 0.25:  # a budget file's fits: a size, a number, or another type
        value = rng.choice([json.dumps(rng.choice(SIZES)), "0", "-1", "1048576", str(1 << 63), "1.5", "true", "[1]",
                            "{a = 1}"])
        zero = value in ("0",) or (value.startswith('"') and _zero(json.loads(value)))
        return name, ["check", "--budget={budget}", f"#{value}"], zero
    argv = ["fit"]
    which = rng.random()
    if which < 0.55:
        size = rng.choice(SIZES)
        argv.append(f"--limit={size}")
        zero = _zero(size)
    elif which < 0.8:
        size = rng.choice(SIZES)
        argv.append(f"--card={size}")
        zero = _zero(size) and allocator != "cuda_host_bfc"  # (the card does not limit the host allocator)
        if rng.random() < 0.4:
            argv.append(f"--compute-capability={rng.choice(CAPABILITIES)}")
    if rng.random() < 0.35:
        argv.append(f"--recorded-limit={rng.choice(SIZES)}")
    if rng.random() < 0.3:
        argv.append(f"--fragmentation-fraction={rng.choice(FRACTIONS)}")
    for option in ("--allow-growth", "--garbage-collection"):
        pick = rng.random()
        if pick < 0.2:
            argv.append(option)
        elif pick < 0.3:
            argv.append("--no-" + option[2:])
    if rng.random() < 0.7:
        argv.append("--no-alternatives")
    form = rng.random()
    if form < 0.4:
        argv.append("--json")
    elif form < 0.55:
        argv += ["--html", "-o", "{out}"]
    return name, argv, zero


def _cases() -> list[tuple[str, list[str], bool]]:
    rng = random.Random(SEED)
    return [_case(rng) for _ in range(RUNS)]


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("profiles")
    return {name: write_profile(where / f"{name}.xplane.pb", events, allocator, available)
            for name, (events, allocator, available) in PROFILES.items()}


@pytest.mark.parametrize(("name", "argv", "zero"), _cases(), ids=[f"{n:03d}-{c[0]}" for n, c in enumerate(_cases())])
def test_fit_on_hostile_sizes_and_options_keeps_the_promise(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                            profiles: dict[str, Path], name: str, argv: list[str],
                                                            zero: bool) -> None:
    argv = [a if a.startswith("#") else a.format(out=tmp_path / "page.html", budget=tmp_path / "budget.toml")
            for a in argv]
    if argv[-1].startswith("#"):  # a budget file's fits value
        (tmp_path / "budget.toml").write_text(f'["{DEVICE[PROFILES[name][1]]}"]\nfits = {argv.pop()[1:]}\n')
    argv.insert(1, str(profiles[name]))
    code = main(argv)  # an exception escaping main is the traceback a user would see
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), argv
    assert "Traceback" not in err, (argv, err)
    assert all(line.startswith("memtrace: ") for line in err.splitlines()), (argv, err)
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("memtrace: error: "), (argv, err)
    elif "--json" in argv:
        _strict_json(out)
    assert not (zero and code == 0), f"a limit of 0 bytes fits: {argv}"  # every profile here asks for bytes
    assert "\x1b" not in out and "\x07" not in out, argv  # names from the trace are escaped
    OUTCOMES.append((argv[0], code))


# -- the same values through the API -----------------------------------------------------------------------

API_VALUES: list[Any] = [0, 1, -1, MIB, 8 * TIB, 8 * TIB + 1, 1 << 63, 1 << 70, -(1 << 63), True, 1.5, None, "0",
                         "0B", "0.4B", "1MiB", "9TiB", "-1MiB", "nan", "inf", "", "x", [1], b"1MiB"]


def _api_cases() -> list[tuple[str, str, Any, Any]]:
    rng = random.Random(SEED + 1)
    return [(rng.choice(["birth", "gc", "huge", "wraps"]), rng.choice(["Trace.fit", "assert_fits"]),
             rng.choice(API_VALUES), rng.choice([None, None, *API_VALUES])) for _ in range(API_CALLS)]


@pytest.mark.parametrize(("name", "call", "limit", "recorded"), _api_cases(),
                         ids=[f"{n:02d}-{c[0]}-{c[1]}" for n, c in enumerate(_api_cases())])
def test_the_api_takes_the_same_values(profiles: dict[str, Path], name: str, call: str, limit: Any,
                                       recorded: Any) -> None:
    trace = memtrace.load(profiles[name])
    allocator = DEVICE[PROFILES[name][1]]
    zero = limit == 0 and not isinstance(limit, bool) or isinstance(limit, str) and _zero(limit)
    try:
        if call == "Trace.fit":
            result = trace.fit(allocator, limit, recorded_limit=recorded, alternatives=False)
            fits = result.fits if limit is not None else None
        else:
            memtrace.testing.assert_fits(trace, allocator, limit)
            fits = True
    except (UsageError, AssertionError):
        return
    assert not (zero and fits), f"a limit of 0 bytes fits: {call}({limit!r})"
