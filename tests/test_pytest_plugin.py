"""The pytest plugin: the memory_budget marker and fixture, run in pytest sessions of their own."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Imported here so that pytester's in-process runs find them loaded and leave them alone.
import memtrace.analyses.check
import memtrace.pytest_plugin
import memtrace.testing

from .conftest import FIXTURES, ROOT, unavailable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

pytest_plugins = ["pytester"]

B8 = FIXTURES / "recorded" / "cpu_convnet_b8.pbtxt"
B8_PEAK = 753_708  # mklcpu, batch 8 (tests/test_diff.py derives it from the tensor shapes)


@pytest.fixture
def session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """Run pytest on the given test file with the plugin loaded explicitly, as its entry point would."""
    # With the entry point installed, autoloading would register the plugin a second time under
    # another name; without it, only -p loads it. Either way: exactly one copy.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def run(source: str, *args: str) -> pytest.RunResult:
        pytester.makepyfile(test_budget=f"import memtrace\nimport pytest\nTRACE = {str(B8)!r}\n\n{source}")
        return pytester.runpytest("-p", "memtrace.pytest_plugin", "--strict-markers", "-p", "no:cacheprovider", *args)

    return run


def test_marker_budget_passes_at_the_limit(session) -> None:
    result = session(f"""
@pytest.mark.memory_budget("mklcpu", max_peak={B8_PEAK}, max_waste="0%")
def test_fits(memory_budget):
    checked = memory_budget(memtrace.load(TRACE))
    assert [o.measured for o in checked.outcomes] == [{B8_PEAK}, 0.0]
""")
    result.assert_outcomes(passed=1)


def test_marker_budget_over_the_limit_fails_with_the_explanation(session) -> None:
    result = session("""
@pytest.mark.memory_budget("mklcpu", max_peak="700KiB")
def test_too_big(memory_budget):
    memory_budget(TRACE)
""")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*mklcpu max_peak: 736 KiB (753,708 B) is over the limit 700 KiB (716,800 B)*",
        "*top contributors at the peak (shares of the peak, baseline included, 736 KiB):*",
        "*conv1/Relu output: 256 KiB (34.8%)*",
    ])


def test_marked_test_that_never_checks_fails(session) -> None:
    result = session("""
@pytest.mark.memory_budget("mklcpu", max_peak="1MiB")
def test_forgot(memory_budget):
    pass

@pytest.mark.memory_budget("mklcpu", max_peak="1MiB")
def test_no_fixture():
    pass
""")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*is marked memory_budget but never called the memory_budget fixture*"])


def test_fixture_without_marker_is_an_error(session) -> None:
    result = session("""
def test_unmarked(memory_budget):
    memory_budget(TRACE)
""")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*has no @pytest.mark.memory_budget(...) stating a budget*"])


@pytest.mark.parametrize(
    ("marker", "says"),
    [
        ('"mklcpu", max_peak="lots"', "*not a size: 'lots'*"),
        ('"mklcpu"', "*write memory_budget(\"ALLOCATOR\"*"),
        ('"mklcpu", max_heap="1MiB"', "*unknown budget 'max_heap'*"),
        ('"GPU_0_bfc", max_peak="1MiB"', "*no allocator 'GPU_0_bfc' in this trace (it has: mklcpu)*"),
    ],
)
def test_bad_marker_is_an_error_not_a_pass(session, marker: str, says: str) -> None:
    result = session(f"""
@pytest.mark.memory_budget({marker})
def test_bad(memory_budget):
    memory_budget(TRACE)
""")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == 0 and outcomes.get("errors", 0) + outcomes.get("failed", 0) == 1
    result.stdout.fnmatch_lines([says])


def test_closest_marker_wins_and_file_budgets_load(session, pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", budget='[mklcpu]\nmax_peak = "1MiB"\nmax_peak_delta = "1MiB"\n')
    result = session("""
pytestmark = pytest.mark.memory_budget("mklcpu", max_peak="1KiB")  # the module's, overridden below

@pytest.mark.memory_budget("mklcpu", max_peak="1MiB")
def test_function_overrides_module(memory_budget):
    assert [(b.metric, b.limit) for b in memory_budget.budgets] == [("max_peak", 1048576)]
    memory_budget(TRACE)

def test_module_budget_applies(memory_budget):
    memory_budget(TRACE)

@pytest.mark.memory_budget(file="budget.toml")
def test_from_file(memory_budget):
    assert [b.metric for b in memory_budget.budgets] == ["max_peak", "max_peak_delta"]
    memory_budget(TRACE)
""")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_module_budget_applies*", "*over the limit 1 KiB (1,024 B)*"])


def test_marker_is_registered_for_strict_markers(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    result = pytester.runpytest("-p", "memtrace.pytest_plugin", "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.memory_budget(allocator, max_peak=SIZE*"])


def test_plugin_loads_nothing_heavy() -> None:
    """pytest imports the plugin in every session of everyone who installs memtrace."""
    code = (
        "import sys, memtrace.pytest_plugin\n"
        "print(','.join(m for m in ('numpy', 'google.protobuf', 'networkx', 'tensorflow', 'memtrace.analyses.check') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == ""


def test_pyproject_declares_the_entry_point() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"memtrace": "memtrace.pytest_plugin"}


def test_installed_entry_point_resolves_to_the_plugin() -> None:
    """Where memtrace is installed with this pyproject (as CI installs it), pytest finds the plugin."""
    points = [ep for ep in importlib.metadata.entry_points(group="pytest11") if ep.name == "memtrace"]
    if not points:
        unavailable("the installed memtrace metadata predates the pytest11 entry point (reinstall to check)")
    assert points[0].value == "memtrace.pytest_plugin"
    assert points[0].load() is memtrace.pytest_plugin


def test_marker_takes_a_device_that_travels_between_machines(session) -> None:
    # CPU:0 is mklcpu on this machine's trace, cpu or bfc_cpu_allocator_for_gpu on others'.
    result = session("""
@pytest.mark.memory_budget("CPU:0", max_peak="700KiB")
def test_too_big(memory_budget):
    memory_budget(TRACE)
""")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*CPU:0 (mklcpu) max_peak: 736 KiB (753,708 B) is over the limit 700 KiB*"])


# -- TensorFlow's environment set before test modules import it (issue 35) -------------------------------------

_TF_VARIABLES = ("TF_CPU_ALLOCATOR_USE_BFC", "TF_NUM_INTEROP_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_ENABLE_ONEDNN_OPTS")
# A stand-in for TensorFlow that remembers the environment it was imported under (what TensorFlow reads then).
_FAKE_TF = f"import os\nSEEN = {{k: os.environ.get(k) for k in {_TF_VARIABLES!r}}}\n"


@pytest.fixture
def fake_tf_session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """A pytest session in a child process, over a test module that imports (a stand-in for) TensorFlow at its top."""
    for name in _TF_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTHONPATH", f"{pytester.path}{os.pathsep}{ROOT}")
    pytester.mkpydir("tensorflow").joinpath("__init__.py").write_text(_FAKE_TF)
    pytester.makepyfile(test_model="import json\nimport tensorflow\n\n\ndef test_environment():\n"
                        "    print('SEEN ' + json.dumps(tensorflow.SEEN))\n")

    def run(*args: str, ini: str = "") -> dict[str, str | None]:
        if ini:
            pytester.makeini(f"[pytest]\n{ini}\n")
        result = pytester.runpytest_subprocess("-p", "memtrace.pytest_plugin", "-s", "-p", "no:cacheprovider", *args)
        result.assert_outcomes(passed=1)
        line = next(line for line in result.outlines if "SEEN " in line)  # (after the module's name, with -s)
        return json.loads(line.split("SEEN ", 1)[1])  # type: ignore[no-any-return]

    return run


def test_the_ini_option_sets_tensorflows_environment_before_test_modules_import_it(fake_tf_session) -> None:
    stable = {"TF_CPU_ALLOCATOR_USE_BFC": "true", "TF_NUM_INTEROP_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
              "TF_ENABLE_ONEDNN_OPTS": "0"}
    assert fake_tf_session() == dict.fromkeys(_TF_VARIABLES)  # without it, nothing is set
    assert fake_tf_session(ini="memtrace_stable_tensorflow = true") == stable
    assert fake_tf_session("--memtrace-stable-tensorflow", ini="memtrace_stable_tensorflow = false") == stable


def test_the_users_own_choice_of_onednn_stays(fake_tf_session, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    assert fake_tf_session("-o", "memtrace_stable_tensorflow=true")["TF_ENABLE_ONEDNN_OPTS"] == "1"


def _copy_with_recording(tmp_path: Path, name: str, unstable: list[str]) -> Path:
    """A fixture profile in a run directory of its own, with the recorder's word beside it."""
    import shutil

    from memtrace.trace.recording import RECORDING_FILE, SCHEMA

    run = tmp_path / name / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    shutil.copy(FIXTURES / "profiles" / "keras_cnn.xplane.pb.gz", run / "host.xplane.pb.gz")
    (run / RECORDING_FILE).write_text(json.dumps({"schema": SCHEMA, "unstable": unstable}))
    return tmp_path / name


def test_an_unstable_recording_is_refused_with_the_reason_not_warned_about(tmp_path: Path) -> None:
    from memtrace.errors import UsageError
    from memtrace.testing import assert_no_regression, assert_peak_below

    why = "TensorFlow ran oneDNN's kernels (it was imported before they could be turned off)"
    unstable, stable = _copy_with_recording(tmp_path, "unstable", [why]), _copy_with_recording(tmp_path, "stable", [])
    assert_peak_below(str(stable), "CPU:0", "1MiB")  # the recorder said nothing varies: checked as ever
    assert_no_regression(str(stable), str(stable))
    for check in (lambda: assert_peak_below(str(unstable), "CPU:0", "1MiB"),
                  lambda: assert_no_regression(str(stable), str(unstable)),
                  lambda: assert_no_regression(memtrace.load(unstable), str(stable))):
        with pytest.raises(UsageError) as refused:
            check()
        assert why in str(refused.value) and "memtrace_stable_tensorflow = true" in str(refused.value)
    # a profile the recorder did not describe (a fixture as it is) is checked as before
    assert_peak_below(str(FIXTURES / "profiles" / "keras_cnn.xplane.pb.gz"), "CPU:0", "1MiB")
    # and a broken recording file is one clear error naming it
    (next((tmp_path / "stable").rglob("memtrace.recording.json"))).write_text("{")
    with pytest.raises(UsageError, match="memtrace.recording.json: not a recording file"):
        assert_peak_below(str(stable), "CPU:0", "1MiB")


_REAL_MODULE = """
import tensorflow as tf  # at the top, as test modules are written
import json, os
import memtrace.testing
import memtrace.tensorflow as mtf


def test_record():
    trace = mtf.profile(tf.function(lambda: tf.ones((64, 64)) * 2.0), steps=1, warmup=0, logdir=os.environ["LOGDIR"])
    try:
        memtrace.testing.assert_peak_below(trace, "CPU:0", "1GiB")
        refused = None
    except memtrace.UsageError as error:
        refused = str(error)
    print("FOUND " + json.dumps({"onednn": mtf.onednn_enabled(), "refused": refused,
                                 "recorded": json.load(open(next(
                                     os.path.join(d, "memtrace.recording.json") for d, _, names in os.walk(os.environ["LOGDIR"])
                                     if "memtrace.recording.json" in names)))}))
"""


@pytest.mark.parametrize("stable", [False, True], ids=["as-is", "memtrace_stable_tensorflow"])
def test_with_tensorflow_imported_at_the_top_the_option_records_a_peak_the_checks_accept(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stable: bool) -> None:
    import importlib.util
    import platform

    # (TensorFlow runs in the child only: pytester's snapshot of sys.modules would make this process import it twice)
    if importlib.util.find_spec("tensorflow") is None:
        unavailable("TensorFlow is not installed")
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("TensorFlow turns oneDNN's kernels on by default in its x86 builds only")
    for name in _TF_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("LOGDIR", str(tmp_path / "logdir"))
    pytester.makepyfile(test_real=_REAL_MODULE)
    result = pytester.runpytest_subprocess("-p", "memtrace.pytest_plugin", "-s", "-p", "no:cacheprovider",
                                           *(["-o", "memtrace_stable_tensorflow=true"] if stable else []), timeout=300)
    result.assert_outcomes(passed=1)
    found = json.loads(next(line for line in result.outlines if "FOUND " in line).split("FOUND ", 1)[1])
    recorded = found["recorded"]
    assert recorded["schema"] == "memtrace.recording/1" and recorded["cpu_bfc"] is True
    if stable:  # oneDNN off and one thread each, from the variables alone: nothing varies, the check runs
        assert found["onednn"] is False and found["refused"] is None and recorded["unstable"] == []
        assert recorded["threads"] == {"inter_op": 1, "intra_op": 1, "chosen": False}
    else:  # TensorFlow imported first runs oneDNN's kernels: the recording says so, the check refuses it
        assert found["onednn"] is True and len(recorded["unstable"]) == 1 and "oneDNN" in recorded["unstable"][0]
        assert "varies from run to run" in found["refused"] and "memtrace_stable_tensorflow = true" in found["refused"]
