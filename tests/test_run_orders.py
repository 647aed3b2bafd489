"""``memtrace run`` says how it records, ``--steady`` records the docs' way, ``--runs N`` records N runs and fits them.

GIVEN a tiny TensorFlow script WHEN memtrace runs it THEN a line says the threads and oneDNN it ran
with and whether the order of allocations will vary; with --steady the script runs on one inter-op
and one intra-op thread with oneDNN off (as TensorFlow itself reports it inside the script); with
--runs 2 two profiles are written and fitted together (the band over both).
"""

from __future__ import annotations

import json
from pathlib import Path

from .test_run import memtrace_run

THREADS = """
import json, os
import tensorflow as tf
x = tf.ones((256, 256))
y = tf.matmul(x, x)
from tensorflow.python.util import _pywrap_util_port
print(json.dumps({"inter": tf.config.threading.get_inter_op_parallelism_threads(),
                  "intra": tf.config.threading.get_intra_op_parallelism_threads(),
                  "onednn": bool(_pywrap_util_port.IsMklEnabled())}))
"""


def test_run_says_how_it_recorded_and_steady_records_one_thread_without_onednn(tmp_path: Path) -> None:
    done = memtrace_run(tmp_path, THREADS, env={"TF_ENABLE_ONEDNN_OPTS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert (found["inter"], found["intra"], found["onednn"]) == (0, 0, True)  # TensorFlow's defaults
    said = " ".join(done.stderr.split())
    assert ("memtrace: recorded with TensorFlow's default inter-op threads (one a core), TensorFlow's default "
            "intra-op threads (one a core), oneDNN's kernels on: ops ran on several threads, so the order of "
            "allocations (and with oneDNN the requests) will vary from run to run") in said
    assert "memtrace run --steady" in said
    (tmp_path / "steady").mkdir()
    steady = memtrace_run(tmp_path / "steady", THREADS, env={"TF_ENABLE_ONEDNN_OPTS": "1"},
                          options=("--cpu-bfc", "--steady"))
    assert steady.returncode == 0, steady.stderr[-2000:]
    found = json.loads(steady.stdout.strip().splitlines()[-1])
    assert (found["inter"], found["intra"], found["onednn"]) == (1, 1, False)  # as the script itself sees it
    said = " ".join(steady.stderr.split())
    assert ("memtrace: recorded with 1 inter-op thread, 1 intra-op thread, oneDNN's kernels off: ops ran one at a "
            "time, so the order of allocations repeats from run to run") in said


def test_runs_records_several_runs_and_fits_them_together(tmp_path: Path) -> None:
    done = memtrace_run(tmp_path, "import tensorflow as tf\nx = tf.ones((256, 256))\ny = tf.matmul(x, x)\n",
                        options=("--cpu-bfc", "--steady", "--runs", "2"))
    assert done.returncode == 0, done.stderr[-2000:]
    for number in (1, 2):
        assert list((tmp_path / "log" / f"run-{number}" / "plugins" / "profile").glob("*/*.xplane.pb"))
        assert f"memtrace: run {number} of 2 into {tmp_path / 'log' / f'run-{number}'}" in done.stderr
    text = " ".join(done.stdout.split())
    assert "bfc_cpu_allocator_for_gpu: 2 recordings of one step" in text
    assert "the orders a run may take: each of the 2 recordings' own orders (no other order is possible)" in text
    assert f"memtrace fit {tmp_path / 'log' / 'run-1'} {tmp_path / 'log' / 'run-2'}" in done.stderr
