"""TensorFlow's own tfprof test traces (``fixtures/tfprof/``): every number tfprof's C++ tests expect of
them that memtrace computes, exactly, on every reading path memtrace has for binary ``RunMetadata``.

The four files are the ``testdata/run_meta`` that ``tfprof_stats_test.cc`` and ``tfprof_show_test.cc``
read, in four versions (fixtures/README.md says where each came from). The expected numbers are those
tests' own, each cited as ``FILE:LINE (TEST)`` of the commit named in :data:`SOURCES`.

What the numbers are, per tfprof version (read in its ``tfprof_node.cc`` of the same commit):

- today's tfprof and tfprof of 2017-08 (1848070): ``requested = sum(total_bytes) + temp + persistent``,
  ``peak``, ``residual``, ``output`` as memtrace's ``ops`` computes them (docs/ops.md). The 2017-08
  trace keeps its temp and persistent sizes in the deprecated ``device_*`` fields, which neither
  tfprof of 2017-08 nor today's folds into requested, peak or residual; nor does memtrace.
  ``cpu_exec_micros`` is the sum of ``op_end_rel_micros`` (0 counts 1) of the node's executions on
  its canonical device, ``accelerator_exec_micros`` the same on ``stream:all``; ``exec_micros`` both.
- tfprof of 2016-09 (e4a63b5) and 2017-03 (404db03): ``requested_bytes`` was the sum of the node's
  outputs' ``requested_bytes``: memtrace's ``output_bytes`` (``max(allocated, requested)``; the 2016
  trace leaves ``allocated_bytes`` 0, the 2017-03 one sets it equal), not its ``requested_bytes``
  (``total_bytes``, which the variables leave 0: DW is 648 B there, 0 B here). ``exec_micros``
  of 2016 was ``op_end_rel_micros - op_start_rel_micros`` where both are set.

memtrace computes no execution times; the time columns below hold the times its reader keeps
(``all_start``, ``op_start_rel``, ``op_end_rel`` of each node) to tfprof's, through tfprof's own
arithmetic on them. The command line has no times, so its path checks bytes and run counts only.

What cannot be checked here, because it comes from the inputs the C++ tests load beside the
run_meta and we do not have (``graph.pbtxt``, ``tfprof_log``, ``ckpt``):

- parameters, float_ops, input_shapes, definition counts, tensor values, and the nodes and op types
  that exist only in the graph (``ScalarW``, ``*/Initializer/*``, ``Add``, ``Assign``, ``Identity``
  in the op view: 0 runs, 0 bytes, no row in memtrace);
- which nodes a view accounts: trainable variables (``CustomOpType``: the op log's
  ``_trainable_variables``), checkpoint variables (``CheckPointOpType``: the ckpt's), ``Variable``
  and ``VariableV2`` (the graph's op types; memtrace's come from the timeline labels and agree). We
  take the nodes each test lists, by name, and check their numbers and their sums;
- the 2016 and 2017-03 ``TestGraph`` (``start_name_regexes`` ``cost.*``) and
  ``TestAccountShownNameOnly`` (``unit_2_1.*DW``) match no node of those graphs: their roots are all
  zeros, nothing of the run_meta;
- tfprof of 2017-03 took ``exec_micros`` from the run_meta's ``cost_graph`` (``compute_cost``,
  ``TFNode::AddNodeStat``), which memtrace does not read: those times are not checked (they equal
  the nodes' ``op_end_rel_micros`` one by one, but that is not how that tfprof got them);
- tfprof of 2017-08 profiled only the graph's nodes: its totals of runs (5), CPU time (4,500 us)
  and time (4,904 us) leave out ``_retval_Conv2D_1_0_0``, which ran (on the CPU, 41 us, no bytes) but
  is not in ``graph.pbtxt``. They are checked as sums over the five graph nodes; memtrace's total row
  has it (6 runs), as today's tfprof has (``TestGraph`` of today: 6 runs, 4,541 us).
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

import pytest

# memtrace's internals this file reaches into, in one place (a module moved is one edit here):
from memtrace.analyses.ops import node_rows  # the rows `memtrace ops --group-by node` prints
from memtrace.cli import main
from memtrace.read import binary as binreader  # BLOCK_BYTES: blocks small enough that -j 2 decodes in workers
from memtrace.read import jobs as read_jobs  # cores(): jobs are capped at the cores this process may use
from memtrace.trace.data import TraceData

from .conftest import FIXTURES, tensorflow_protos
from .fastpaths import fast, reference  # memtrace's streaming readers alone; protobuf's parser alone

TFPROF = FIXTURES / "tfprof"
CURRENT, AUG2017, MAR2017, SEP2016 = (
    "tfprof_run_meta_current_gpu.pb", "tfprof_run_meta_2017_08_gpu.pb", "tfprof_run_meta_2017_03_cpu.pb",
    "tfprof_run_meta_2016_cpu.pb",
)
NAMES = [SEP2016, MAR2017, AUG2017, CURRENT]

# Byte-for-byte copies of TensorFlow's files (fixtures/README.md says whence): a fixture "fixed" proves nothing.
SHA256 = {
    SEP2016: "e31a30dad673ad8adecd72f43e7fffc4f0ea02d5ad2fddab4221ccdb0432d4af",
    MAR2017: "3b4b0bd0ef5eeb2256c9b5e73cbd0255b7446fe38140fcabb7f2e5488d102974",
    AUG2017: "367f41089bca6ae39412a40a37359b81022a959e695939901b1e7359cbf7bb2b",
    CURRENT: "d81a55ec16fe2626d8a70fe634767079b353553d737d68cf4da2543f055ba32e",
}

# Where the expected numbers are: ``stats`` is tfprof_stats_test.cc, ``show`` tfprof_show_test.cc.
SOURCES = {
    SEP2016: "emacslisp/tensorflow@e4a63b578f97c9dca26fd4d3a364f90a94cb45b5 tensorflow/contrib/tfprof/tools/tfprof/internal/",
    MAR2017: "emacslisp/tensorflow@404db0358aacc0fc2319fc333df4cc5bc0fc404a tensorflow/tools/tfprof/internal/",
    AUG2017: "emacslisp/tensorflow@1848070f47cfb6810554d9c1e6c32bf4da7a85bd tensorflow/core/profiler/internal/",
    # the tests beside the exact bytes (blob eaea62b0); tensorflow/tensorflow's index holds the same numbers
    CURRENT: "theIArchitecture/tensorflow@802a41cfb1e74aea250c1d872ac1df502ceb1424 tensorflow/core/profiler/internal/",
}


class Check(NamedTuple):
    """One number a tfprof test expects: of a node, of ``A+B`` (their sum), of ``*`` (memtrace's total row,
    every node) or of ``type:T`` (tfprof's op view); in memtrace's column; an int where the test has the
    number, its text where the test has only tfprof's rendering of it (``1.28KB``, ``4.07ms``, ``8.40%``)."""

    what: str
    column: str
    expected: int | str
    where: str


BYTES = ("requested_bytes", "peak_bytes", "residual_bytes", "output_bytes")
MICROS = ("cpu_exec_micros", "accelerator_exec_micros", "exec_micros", "exec_micros_2016")
COLUMNS = ("occurrences", *BYTES, *MICROS, "requested_share", "device")
CPU0, GPU0 = "/job:localhost/replica:0/task:0/cpu:0", "/job:localhost/replica:0/task:0/gpu:0"
GRAPH_NODES_2017_08 = "Conv2D+Conv2D_1+DW+DW2+zeros"  # the run nodes graph.pbtxt has (not _retval_Conv2D_1_0_0)

EXPECTED: dict[str, list[Check]] = {
    # tfprof of 2016-09: requested_bytes = the outputs' requested bytes (memtrace's output_bytes).
    SEP2016: [
        Check("DW", "output_bytes", 648, "stats:87 (CustomOpType), 111 (CheckPointOpType)"),
        Check("DW", "exec_micros_2016", 0, "stats:86 (CustomOpType), 110 (CheckPointOpType)"),
        Check("DW", "device", CPU0, "stats:89 (CustomOpType), 113 (CheckPointOpType)"),
        Check("DW2", "output_bytes", 1152, "stats:91 (CustomOpType), 115 (CheckPointOpType)"),
        Check("DW2", "exec_micros_2016", 0, "stats:90 (CustomOpType), 114 (CheckPointOpType)"),
        Check("DW2", "device", CPU0, "stats:93 (CustomOpType), 117 (CheckPointOpType)"),
        Check("DW+DW2", "output_bytes", 1800, "stats:85 (CustomOpType), 109 (CheckPointOpType)"),
        Check("DW+DW2", "exec_micros_2016", 0, "stats:85 (CustomOpType), 109 (CheckPointOpType)"),
        Check("Conv2D", "output_bytes", 432, "stats:150 (TestFloatOps)"),
        Check("Conv2D", "exec_micros_2016", 0, "stats:150 (TestFloatOps): op_start_rel_micros unset"),
        Check("Conv2D", "device", CPU0, "stats:152 (TestFloatOps)"),
        Check("Conv2D_1", "output_bytes", 384, "stats:154 (TestFloatOps)"),
        Check("Conv2D_1", "exec_micros_2016", 10, "stats:154 (TestFloatOps)"),
        Check("Conv2D_1", "device", CPU0, "stats:156 (TestFloatOps)"),
        Check("*", "output_bytes", 5280, "stats:149 (TestFloatOps), 188 (TestShowTensorValue)"),
        Check("*", "exec_micros_2016", 11, "stats:148 (TestFloatOps), 187 (TestShowTensorValue)"),
        Check("DW+DW2", "output_bytes", "1.80KB", "show:85 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "exec_micros_2016", "0us", "show:85 (DumpScopeMode, _TFProfRoot)"),
        Check("DW", "output_bytes", "648B", "show:86 (DumpScopeMode)"),
        Check("DW", "exec_micros_2016", "0us", "show:86 (DumpScopeMode)"),
        Check("DW2", "output_bytes", "1.15KB", "show:87 (DumpScopeMode)"),
        Check("DW2", "exec_micros_2016", "0us", "show:87 (DumpScopeMode)"),
    ],
    # tfprof of 2017-03: requested_bytes = the outputs' requested bytes; exec_micros from the cost graph (not checked).
    MAR2017: [
        Check("conv2d/bias", "output_bytes", 20, "stats:86 (CustomOpType), 118 (CheckPointOpType)"),
        Check("conv2d/bias", "device", CPU0, "stats:88 (CustomOpType), 120 (CheckPointOpType)"),
        Check("conv2d/kernel", "output_bytes", 540, "stats:90 (CustomOpType), 122 (CheckPointOpType)"),
        Check("conv2d/kernel", "device", CPU0, "stats:92 (CustomOpType), 124 (CheckPointOpType)"),
        Check("conv2d_1/bias", "output_bytes", 20, "stats:94 (CustomOpType), 126 (CheckPointOpType)"),
        Check("conv2d_1/bias", "device", CPU0, "stats:96 (CustomOpType), 128 (CheckPointOpType)"),
        Check("conv2d_1/kernel", "output_bytes", 900, "stats:98 (CustomOpType), 130 (CheckPointOpType)"),
        Check("conv2d_1/kernel", "device", CPU0, "stats:100 (CustomOpType), 132 (CheckPointOpType)"),
        Check("conv2d/bias+conv2d/kernel+conv2d_1/bias+conv2d_1/kernel", "output_bytes", 1480,
              "stats:84 (CustomOpType), 116 (CheckPointOpType)"),
        Check("conv2d/BiasAdd", "output_bytes", 1440, "stats:165 (TestFloatOps)"),
        Check("conv2d/BiasAdd", "device", CPU0, "stats:167 (TestFloatOps)"),
        Check("conv2d/convolution", "output_bytes", 1440, "stats:169 (TestFloatOps)"),
        Check("conv2d/convolution", "device", CPU0, "stats:171 (TestFloatOps)"),
        Check("conv2d_2/BiasAdd", "output_bytes", 640, "stats:173 (TestFloatOps)"),
        Check("conv2d_2/BiasAdd", "device", CPU0, "stats:175 (TestFloatOps)"),
        Check("conv2d_2/convolution", "output_bytes", 640, "stats:177 (TestFloatOps)"),
        Check("conv2d_2/convolution", "device", CPU0, "stats:179 (TestFloatOps)"),
        Check("*", "output_bytes", 8656, "stats:164 (TestFloatOps), 211 (TestShowTensorValue)"),
        Check("conv2d/bias+conv2d/kernel+conv2d_1/bias+conv2d_1/kernel", "output_bytes", "1.48KB",
              "show:84 (DumpScopeMode, _TFProfRoot)"),
        Check("conv2d/bias", "output_bytes", "20B", "show:85 (DumpScopeMode)"),
        Check("conv2d/kernel", "output_bytes", "540B", "show:86 (DumpScopeMode)"),
        Check("conv2d_1/bias", "output_bytes", "20B", "show:87 (DumpScopeMode)"),
        Check("conv2d_1/kernel", "output_bytes", "900B", "show:89 (DumpScopeMode)"),
    ],
    # tfprof of 2017-08: today's columns, without the deprecated device_* memory stats; graph nodes only.
    AUG2017: [
        Check("DW", "requested_bytes", 0, "stats:85-89 (CustomOpType: absent, so 0), 113-117 (CheckPointOpType)"),
        Check("DW", "peak_bytes", 0, "stats:85-89 (CustomOpType: absent, so 0)"),
        Check("DW", "residual_bytes", 0, "stats:85-89 (CustomOpType: absent, so 0)"),
        Check("DW", "output_bytes", 1280, "stats:89 (CustomOpType), 117 (CheckPointOpType), 337 (TestShowTensorValue)"),
        Check("DW", "occurrences", 1, "stats:88 (CustomOpType), 116 (CheckPointOpType), 335 (TestShowTensorValue)"),
        Check("DW", "exec_micros", 2, "stats:85 (CustomOpType), 113 (CheckPointOpType), 251 (TestShowTensorValue)"),
        Check("DW", "cpu_exec_micros", 2, "stats:87 (CustomOpType), 115 (CheckPointOpType), 335 (TestShowTensorValue)"),
        Check("DW", "accelerator_exec_micros", 0, "stats:85-89 (CustomOpType: absent, so 0)"),
        Check("DW", "device", GPU0, "stats:87 (CustomOpType), 115 (CheckPointOpType), 253 (TestShowTensorValue)"),
        Check("DW2", "requested_bytes", 0, "stats:90-94 (CustomOpType: absent, so 0)"),
        Check("DW2", "peak_bytes", 0, "stats:90-94 (CustomOpType: absent, so 0)"),
        Check("DW2", "residual_bytes", 0, "stats:90-94 (CustomOpType: absent, so 0)"),
        Check("DW2", "output_bytes", 1280, "stats:94 (CustomOpType), 122 (CheckPointOpType)"),
        Check("DW2", "occurrences", 1, "stats:93 (CustomOpType), 121 (CheckPointOpType)"),
        Check("DW2", "exec_micros", 11, "stats:90 (CustomOpType), 118 (CheckPointOpType)"),
        Check("DW2", "cpu_exec_micros", 11, "stats:92 (CustomOpType), 120 (CheckPointOpType)"),
        Check("DW2", "device", GPU0, "stats:92 (CustomOpType), 120 (CheckPointOpType)"),
        Check("DW+DW2", "exec_micros", 13, "stats:84 (CustomOpType), 112 (CheckPointOpType)"),
        Check("DW+DW2", "cpu_exec_micros", 13, "stats:97 (CustomOpType), 125 (CheckPointOpType)"),
        Check("DW+DW2", "occurrences", 2, "stats:98 (CustomOpType), 126 (CheckPointOpType)"),
        Check("DW+DW2", "output_bytes", 2560, "stats:98 (CustomOpType), 126 (CheckPointOpType)"),
        Check("Conv2D", "requested_bytes", 9472, "stats:171 (TestFloatOps)"),
        Check("Conv2D", "peak_bytes", 5888, "stats:183 (TestFloatOps)"),
        Check("Conv2D", "residual_bytes", 768, "stats:183 (TestFloatOps)"),
        Check("Conv2D", "output_bytes", 768, "stats:184 (TestFloatOps)"),
        Check("Conv2D", "occurrences", 1, "stats:182 (TestFloatOps)"),
        Check("Conv2D", "exec_micros", 4292, "stats:171 (TestFloatOps)"),
        Check("Conv2D", "accelerator_exec_micros", 226, "stats:180 (TestFloatOps)"),
        Check("Conv2D", "cpu_exec_micros", 4066, "stats:181 (TestFloatOps)"),
        Check("Conv2D", "device", GPU0, "stats:173 (TestFloatOps)"),
        Check("Conv2D_1", "requested_bytes", 5120, "stats:186 (TestFloatOps), 219 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "peak_bytes", 4096, "stats:198 (TestFloatOps), 231 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "residual_bytes", 512, "stats:198 (TestFloatOps), 231 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "output_bytes", 512, "stats:199 (TestFloatOps), 232 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "occurrences", 1, "stats:197 (TestFloatOps), 230 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "exec_micros", 597, "stats:186 (TestFloatOps), 217-218 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "accelerator_exec_micros", 178, "stats:195 (TestFloatOps), 228 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "cpu_exec_micros", 419, "stats:196 (TestFloatOps), 229 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "device", GPU0, "stats:188 (TestFloatOps), 221 (TestAccountShownNameOnly)"),
        Check("*", "requested_bytes", 14592, "stats:141 (TestGraph), 170 (TestFloatOps), 250 (TestShowTensorValue)"),
        Check("*", "peak_bytes", 9984, "stats:157 (TestGraph), 203 (TestFloatOps), 340 (TestShowTensorValue)"),
        Check("*", "residual_bytes", 1280, "stats:157 (TestGraph), 203 (TestFloatOps), 340 (TestShowTensorValue)"),
        Check("*", "output_bytes", 4864, "stats:157 (TestGraph), 203 (TestFloatOps), 340 (TestShowTensorValue)"),
        Check("*", "accelerator_exec_micros", 404, "stats:155 (TestGraph), 201 (TestFloatOps), 338 (TestShowTensorValue)"),
        Check(GRAPH_NODES_2017_08, "cpu_exec_micros", 4500,
              "stats:155 (TestGraph), 202 (TestFloatOps), 339 (TestShowTensorValue)"),
        Check(GRAPH_NODES_2017_08, "exec_micros", 4904,
              "stats:140 (TestGraph), 169 (TestFloatOps), 249 (TestShowTensorValue)"),
        Check(GRAPH_NODES_2017_08, "occurrences", 5,
              "stats:156 (TestGraph), 202 (TestFloatOps), 339 (TestShowTensorValue)"),
        Check("DW+DW2", "requested_bytes", "0B", "show:91 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "peak_bytes", "0B", "show:91 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "residual_bytes", "0B", "show:91 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "output_bytes", "2.56KB", "show:91 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "exec_micros", "13us", "show:91 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "accelerator_exec_micros", "0us", "show:91 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "cpu_exec_micros", "13us", "show:91 (DumpScopeMode, _TFProfRoot)"),
        Check("DW", "requested_bytes", "0B", "show:92 (DumpScopeMode)"),
        Check("DW", "peak_bytes", "0B", "show:92 (DumpScopeMode)"),
        Check("DW", "residual_bytes", "0B", "show:92 (DumpScopeMode)"),
        Check("DW", "output_bytes", "1.28KB", "show:93 (DumpScopeMode)"),
        Check("DW", "exec_micros", "2us", "show:93 (DumpScopeMode)"),
        Check("DW", "cpu_exec_micros", "2us", "show:93 (DumpScopeMode), 122 (DumpAcceleratorAndCPUMicros)"),
        Check("DW2", "requested_bytes", "0B", "show:94 (DumpScopeMode)"),
        Check("DW2", "peak_bytes", "0B", "show:94 (DumpScopeMode)"),
        Check("DW2", "residual_bytes", "0B", "show:94 (DumpScopeMode)"),
        Check("DW2", "output_bytes", "1.28KB", "show:94 (DumpScopeMode)"),
        Check("DW2", "exec_micros", "11us", "show:94 (DumpScopeMode)"),
        Check("DW2", "accelerator_exec_micros", "0us", "show:95 (DumpScopeMode), 114 (DumpAcceleratorAndCPUMicros)"),
        Check("DW2", "cpu_exec_micros", "11us", "show:95 (DumpScopeMode), 115 (DumpAcceleratorAndCPUMicros)"),
        Check("*", "accelerator_exec_micros", "404us", "show:113 (DumpAcceleratorAndCPUMicros, _TFProfRoot)"),
        Check(GRAPH_NODES_2017_08, "cpu_exec_micros", "4.50ms", "show:113 (DumpAcceleratorAndCPUMicros, _TFProfRoot)"),
        Check("Conv2D", "accelerator_exec_micros", "226us", "show:113 (DumpAcceleratorAndCPUMicros)"),
        Check("Conv2D", "cpu_exec_micros", "4.07ms", "show:114 (DumpAcceleratorAndCPUMicros)"),
        Check("Conv2D_1", "accelerator_exec_micros", "178us", "show:114 (DumpAcceleratorAndCPUMicros)"),
        Check("Conv2D_1", "cpu_exec_micros", "419us", "show:114 (DumpAcceleratorAndCPUMicros)"),
        Check("DW", "accelerator_exec_micros", "0us", "show:122 (DumpAcceleratorAndCPUMicros)"),
        Check("zeros", "accelerator_exec_micros", "0us", "show:130 (DumpAcceleratorAndCPUMicros)"),
        Check("zeros", "cpu_exec_micros", "2us", "show:130 (DumpAcceleratorAndCPUMicros)"),
        Check("type:VariableV2", "requested_bytes", "0B", "show:159 (DumpOpMode)"),
        Check("type:VariableV2", "requested_share", "0.00%", "show:159 (DumpOpMode)"),
        Check("type:VariableV2", "exec_micros", "13us", "show:159 (DumpOpMode)"),
        Check("type:VariableV2", "accelerator_exec_micros", "0us", "show:159 (DumpOpMode)"),
        Check("type:VariableV2", "cpu_exec_micros", "13us", "show:160 (DumpOpMode)"),
        Check("type:VariableV2", "occurrences", 2, "show:161 (DumpOpMode: run 2)"),
        Check("type:Const", "requested_bytes", "0B", "show:171 (DumpOpMode)"),
        Check("type:Const", "exec_micros", "2us", "show:171 (DumpOpMode)"),
        Check("type:Const", "accelerator_exec_micros", "0us", "show:171 (DumpOpMode)"),
        Check("type:Const", "cpu_exec_micros", "2us", "show:172 (DumpOpMode)"),
        Check("type:Const", "occurrences", 1, "show:172 (DumpOpMode: run 1)"),
        Check("type:Conv2D", "requested_bytes", "14.59KB", "show:173 (DumpOpMode)"),
        Check("type:Conv2D", "requested_share", "100.00%", "show:174 (DumpOpMode)"),
        Check("type:Conv2D", "exec_micros", "4.89ms", "show:174 (DumpOpMode)"),
        Check("type:Conv2D", "accelerator_exec_micros", "404us", "show:174 (DumpOpMode)"),
        Check("type:Conv2D", "cpu_exec_micros", "4.49ms", "show:174 (DumpOpMode)"),
        Check("type:Conv2D", "occurrences", 2, "show:175-176 (DumpOpMode: run 2)"),
    ],
    # today's tfprof: requested, peak and residual fold in temp_memory_size and persistent_memory_size.
    CURRENT: [
        Check("DW", "requested_bytes", 1280,
              "stats:92 (CustomOpType), 128 (CheckPointOpType), 279 (TestShowTensorValue)"),
        Check("DW", "peak_bytes", 1280, "stats:96 (CustomOpType), 132 (CheckPointOpType), 365 (TestShowTensorValue)"),
        Check("DW", "residual_bytes", 1280,
              "stats:96 (CustomOpType), 132 (CheckPointOpType), 366 (TestShowTensorValue)"),
        Check("DW", "output_bytes", 1280, "stats:97 (CustomOpType), 133 (CheckPointOpType), 366 (TestShowTensorValue)"),
        Check("DW", "occurrences", 1, "stats:95 (CustomOpType), 131 (CheckPointOpType), 364 (TestShowTensorValue)"),
        Check("DW", "exec_micros", 2, "stats:92 (CustomOpType), 128 (CheckPointOpType), 279 (TestShowTensorValue)"),
        Check("DW", "cpu_exec_micros", 2, "stats:94 (CustomOpType), 130 (CheckPointOpType), 364 (TestShowTensorValue)"),
        Check("DW", "accelerator_exec_micros", 0, "stats:91-98 (CustomOpType: absent, so 0)"),
        Check("DW", "device", GPU0, "stats:94 (CustomOpType), 130 (CheckPointOpType), 282 (TestShowTensorValue)"),
        Check("DW2", "requested_bytes", 1280, "stats:99 (CustomOpType), 135 (CheckPointOpType)"),
        Check("DW2", "peak_bytes", 1280, "stats:104 (CustomOpType), 140 (CheckPointOpType)"),
        Check("DW2", "residual_bytes", 1280, "stats:104 (CustomOpType), 140 (CheckPointOpType)"),
        Check("DW2", "output_bytes", 1280, "stats:105 (CustomOpType), 141 (CheckPointOpType)"),
        Check("DW2", "occurrences", 1, "stats:103 (CustomOpType), 139 (CheckPointOpType)"),
        Check("DW2", "exec_micros", 11, "stats:99 (CustomOpType), 135 (CheckPointOpType)"),
        Check("DW2", "cpu_exec_micros", 11, "stats:102 (CustomOpType), 138 (CheckPointOpType)"),
        Check("DW2", "device", GPU0, "stats:102 (CustomOpType), 138 (CheckPointOpType)"),
        Check("DW+DW2", "requested_bytes", 2560, "stats:91 (CustomOpType), 127 (CheckPointOpType)"),
        Check("DW+DW2", "peak_bytes", 2560, "stats:110 (CustomOpType), 146 (CheckPointOpType)"),
        Check("DW+DW2", "residual_bytes", 2560, "stats:110 (CustomOpType), 146 (CheckPointOpType)"),
        Check("DW+DW2", "output_bytes", 2560, "stats:110 (CustomOpType), 146 (CheckPointOpType)"),
        Check("DW+DW2", "occurrences", 2, "stats:109 (CustomOpType), 145 (CheckPointOpType)"),
        Check("DW+DW2", "exec_micros", 13, "stats:90 (CustomOpType), 126 (CheckPointOpType)"),
        Check("DW+DW2", "cpu_exec_micros", 13, "stats:108 (CustomOpType), 144 (CheckPointOpType)"),
        Check("Conv2D", "requested_bytes", 18176, "stats:195 (TestFloatOps)"),
        Check("Conv2D", "peak_bytes", 14592, "stats:207 (TestFloatOps)"),
        Check("Conv2D", "residual_bytes", 768, "stats:207 (TestFloatOps)"),
        Check("Conv2D", "output_bytes", 768, "stats:208 (TestFloatOps)"),
        Check("Conv2D", "occurrences", 1, "stats:206 (TestFloatOps)"),
        Check("Conv2D", "exec_micros", 4292, "stats:195 (TestFloatOps)"),
        Check("Conv2D", "accelerator_exec_micros", 226, "stats:204 (TestFloatOps)"),
        Check("Conv2D", "cpu_exec_micros", 4066, "stats:205 (TestFloatOps)"),
        Check("Conv2D", "device", GPU0, "stats:197 (TestFloatOps)"),
        Check("Conv2D_1", "requested_bytes", 9728, "stats:210 (TestFloatOps), 245 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "peak_bytes", 8704, "stats:222 (TestFloatOps), 257 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "residual_bytes", 512, "stats:222 (TestFloatOps), 257 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "output_bytes", 512, "stats:223 (TestFloatOps), 258 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "occurrences", 1, "stats:221 (TestFloatOps), 256 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "exec_micros", 597, "stats:210 (TestFloatOps), 244 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "accelerator_exec_micros", 178, "stats:219 (TestFloatOps), 254 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "cpu_exec_micros", 419, "stats:220 (TestFloatOps), 255 (TestAccountShownNameOnly)"),
        Check("Conv2D_1", "device", GPU0, "stats:212 (TestFloatOps), 247 (TestAccountShownNameOnly)"),
        Check("*", "requested_bytes", 30464, "stats:163 (TestGraph), 194 (TestFloatOps), 278 (TestShowTensorValue)"),
        Check("*", "peak_bytes", 25856, "stats:179 (TestGraph), 227 (TestFloatOps), 371 (TestShowTensorValue)"),
        Check("*", "residual_bytes", 3840, "stats:179 (TestGraph), 227 (TestFloatOps), 371 (TestShowTensorValue)"),
        Check("*", "output_bytes", 4864, "stats:179 (TestGraph), 227 (TestFloatOps), 371 (TestShowTensorValue)"),
        Check("*", "occurrences", 6, "stats:178 (TestGraph), 226 (TestFloatOps), 370 (TestShowTensorValue)"),
        Check("*", "exec_micros", 4945, "stats:162 (TestGraph), 193 (TestFloatOps), 277 (TestShowTensorValue)"),
        Check("*", "accelerator_exec_micros", 404, "stats:177 (TestGraph), 225 (TestFloatOps), 369 (TestShowTensorValue)"),
        Check("*", "cpu_exec_micros", 4541, "stats:177 (TestGraph), 226 (TestFloatOps), 369 (TestShowTensorValue)"),
        Check("DW+DW2", "requested_bytes", "2.56KB", "show:113 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "peak_bytes", "2.56KB", "show:113 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "residual_bytes", "2.56KB", "show:113 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "output_bytes", "2.56KB", "show:113 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "exec_micros", "13us", "show:113 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "accelerator_exec_micros", "0us", "show:113 (DumpScopeMode, _TFProfRoot)"),
        Check("DW+DW2", "cpu_exec_micros", "13us", "show:114 (DumpScopeMode, _TFProfRoot)"),
        Check("DW", "requested_bytes", "1.28KB", "show:114 (DumpScopeMode)"),
        Check("DW", "peak_bytes", "1.28KB", "show:115 (DumpScopeMode)"),
        Check("DW", "residual_bytes", "1.28KB", "show:115 (DumpScopeMode)"),
        Check("DW", "output_bytes", "1.28KB", "show:115 (DumpScopeMode)"),
        Check("DW", "exec_micros", "2us", "show:115 (DumpScopeMode)"),
        Check("DW", "accelerator_exec_micros", "0us", "show:115 (DumpScopeMode), 148 (DumpAcceleratorAndCPUMicros)"),
        Check("DW", "cpu_exec_micros", "2us", "show:116 (DumpScopeMode), 148 (DumpAcceleratorAndCPUMicros)"),
        Check("DW2", "requested_bytes", "1.28KB", "show:116 (DumpScopeMode)"),
        Check("DW2", "peak_bytes", "1.28KB", "show:117 (DumpScopeMode)"),
        Check("DW2", "residual_bytes", "1.28KB", "show:117 (DumpScopeMode)"),
        Check("DW2", "output_bytes", "1.28KB", "show:117 (DumpScopeMode)"),
        Check("DW2", "exec_micros", "11us", "show:117 (DumpScopeMode)"),
        Check("DW2", "accelerator_exec_micros", "0us", "show:117 (DumpScopeMode), 140 (DumpAcceleratorAndCPUMicros)"),
        Check("DW2", "cpu_exec_micros", "11us", "show:118 (DumpScopeMode), 140 (DumpAcceleratorAndCPUMicros)"),
        Check("*", "accelerator_exec_micros", "404us", "show:138 (DumpAcceleratorAndCPUMicros, _TFProfRoot)"),
        Check("*", "cpu_exec_micros", "4.54ms", "show:138 (DumpAcceleratorAndCPUMicros, _TFProfRoot)"),
        Check("Conv2D", "accelerator_exec_micros", "226us", "show:138 (DumpAcceleratorAndCPUMicros)"),
        Check("Conv2D", "cpu_exec_micros", "4.07ms", "show:139 (DumpAcceleratorAndCPUMicros)"),
        Check("Conv2D_1", "accelerator_exec_micros", "178us", "show:139 (DumpAcceleratorAndCPUMicros)"),
        Check("Conv2D_1", "cpu_exec_micros", "419us", "show:139 (DumpAcceleratorAndCPUMicros)"),
        Check("_retval_Conv2D_1_0_0", "accelerator_exec_micros", "0us", "show:140 (DumpAcceleratorAndCPUMicros)"),
        Check("_retval_Conv2D_1_0_0", "cpu_exec_micros", "41us", "show:140 (DumpAcceleratorAndCPUMicros)"),
        Check("zeros", "accelerator_exec_micros", "0us", "show:156 (DumpAcceleratorAndCPUMicros)"),
        Check("zeros", "cpu_exec_micros", "2us", "show:156 (DumpAcceleratorAndCPUMicros)"),
        Check("type:VariableV2", "requested_bytes", "2.56KB", "show:187 (DumpOpMode)"),
        Check("type:VariableV2", "requested_share", "8.40%", "show:187 (DumpOpMode)"),
        Check("type:VariableV2", "exec_micros", "13us", "show:187 (DumpOpMode)"),
        Check("type:VariableV2", "accelerator_exec_micros", "0us", "show:187 (DumpOpMode)"),
        Check("type:VariableV2", "cpu_exec_micros", "13us", "show:188 (DumpOpMode)"),
        Check("type:VariableV2", "occurrences", 2, "show:189 (DumpOpMode: run 2)"),
        Check("type:Const", "requested_bytes", "0B", "show:199 (DumpOpMode)"),
        Check("type:Const", "requested_share", "0.00%", "show:199 (DumpOpMode)"),
        Check("type:Const", "exec_micros", "2us", "show:199 (DumpOpMode)"),
        Check("type:Const", "accelerator_exec_micros", "0us", "show:199 (DumpOpMode)"),
        Check("type:Const", "cpu_exec_micros", "2us", "show:200 (DumpOpMode)"),
        Check("type:Const", "occurrences", 1, "show:200 (DumpOpMode: run 1)"),
        Check("type:Conv2D", "requested_bytes", "27.90KB", "show:201 (DumpOpMode)"),
        Check("type:Conv2D", "requested_share", "91.60%", "show:202 (DumpOpMode)"),
        Check("type:Conv2D", "exec_micros", "4.89ms", "show:202 (DumpOpMode)"),
        Check("type:Conv2D", "accelerator_exec_micros", "404us", "show:202 (DumpOpMode)"),
        Check("type:Conv2D", "cpu_exec_micros", "4.49ms", "show:202 (DumpOpMode)"),
        Check("type:Conv2D", "occurrences", 2, "show:203-204 (DumpOpMode: run 2)"),
    ],
}


# -- what memtrace says, by every reading path ------------------------------------------------------

Found = dict[str, dict[str, Any]]  # node name, or "type:T" -> column -> value
READERS = ["fast", "protobuf", "fast, gzip", "protobuf, gzip", "fast, -j 2", "cli", "cli, gzip", "cli, -j 2"]


def _gzipped(path: Path, tmp_path: Path) -> Path:
    copy = tmp_path / f"{path.name}.gz"
    copy.write_bytes(gzip.compress(path.read_bytes()))
    return copy


def _in_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """One node a block, so that with -j 2 every block after the first is decoded in a worker process."""
    monkeypatch.setattr(binreader, "BLOCK_BYTES", 1)
    monkeypatch.setattr(read_jobs, "cores", lambda: 4)  # (jobs are capped at the cores: CI may have one)


def _read(reader: str, path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> tuple[list[dict[str, Any]], TraceData | None]:
    """memtrace's per-node rows of ``path`` read by ``reader``, and the trace it read (None for the CLI)."""
    if "gzip" in reader:
        path = _gzipped(path, tmp_path)
    if "-j 2" in reader:
        _in_workers(monkeypatch)
    if reader.startswith("cli"):
        capsys.readouterr()
        assert main(["ops", str(path), "--group-by", "node", "--json", *(["-j", "2"] if "-j 2" in reader else [])]) == 0
        return json.loads(capsys.readouterr().out)["rows"], None
    if reader.startswith("protobuf"):
        trace = reference(path)
    else:
        got = fast(path, jobs=2 if "-j 2" in reader else 1)
        assert got is not None, "memtrace's fast reader stepped aside"
        trace = got
    return [dataclasses.asdict(row) for row in node_rows(trace)], trace


CANONICAL = re.compile(r".*/(device:gpu|gpu|device:cpu|cpu):\d+")  # tfprof's CountAsCPUTime (tfprof_node.cc)


def _times(trace: TraceData) -> defaultdict[str, defaultdict[str, int]]:
    """Per op name, the execution times tfprof derives from the node times memtrace read.

    Today's and 2017-08's ``ExecStep::AddTimeStats``: executions with ``all_start_micros > 0``;
    ``op_end_rel_micros`` (0 counts 1) summed on ``stream:all`` devices (accelerator) and on canonical
    devices (CPU). 2016's ``TFNode::AddStepStat``: ``op_end_rel - op_start_rel`` where both are set.
    """
    nodes = trace.nodes
    times: defaultdict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in range(len(nodes)):
        start = int(nodes.start_ns[row])
        if start <= 0:
            continue
        name = trace.strings[nodes.name[row]].split(":", 1)[0]
        device = trace.devices.name[nodes.device[row]].lower()
        op_start_rel, op_end_rel = (int(nodes.op_start_ns[row]) - start) // 1000, (int(nodes.op_end_ns[row]) - start) // 1000
        if "stream:all" in device:
            times[name]["accelerator_exec_micros"] += op_end_rel or 1
        elif CANONICAL.fullmatch(device):
            times[name]["cpu_exec_micros"] += op_end_rel or 1
            times[name]["exec_micros_2016"] += op_end_rel - op_start_rel if op_start_rel and op_end_rel else 0
    return times


def _found(rows: list[dict[str, Any]], trace: TraceData | None) -> Found:
    """Per node (and per op type, as tfprof's op view sums them), memtrace's columns, and the times."""
    found: Found = {row["name"]: {c: row[c] for c in ("occurrences", *BYTES, "device")} for row in rows}
    if trace is not None:
        times = _times(trace)
        for name, columns in found.items():
            columns.update({c: times[name][c] for c in MICROS if c != "exec_micros"})
            columns["exec_micros"] = columns["cpu_exec_micros"] + columns["accelerator_exec_micros"]
    for row in rows:
        of_type = found.setdefault(f"type:{row['op_type']}", {})
        for column, value in found[row["name"]].items():
            if column != "device":
                of_type[column] = of_type.get(column, 0) + value
    return found


def _tfprof_text(column: str, value: int, total_requested: int) -> str:
    """``value`` as tfprof prints it (tfprof_utils.cc ``FormatMemory``, ``FormatTime``; the op view's shares)."""
    if column == "requested_share":
        return f"{100 * value / total_requested:.2f}%"
    if column in BYTES:
        return f"{value}B" if value < 1000 else f"{value / 1000:.2f}KB" if value < 1_000_000 else f"{value / 1e6:.2f}MB"
    return f"{value}us" if value < 1000 else f"{value / 1000:.2f}ms" if value < 1_000_000 else f"{value / 1e6:.2f}sec"


def _value(found: Found, what: str, column: str) -> Any:
    assert column in COLUMNS, column
    source = "requested_bytes" if column == "requested_share" else column
    if what == "*":
        names = [name for name in found if not name.startswith("type:")]
    else:
        names = what.split("+")
    values = [found[name][source] for name in names]
    return values[0] if column == "device" else sum(values)


def _disagreements(name: str, found: Found, with_times: bool) -> list[str]:
    total_requested = _value(found, "*", "requested_bytes")
    wrong = []
    for check in EXPECTED[name]:
        if check.column in MICROS and not with_times:
            continue
        value = _value(found, check.what, check.column)
        if isinstance(check.expected, str) and check.column != "device":
            value = _tfprof_text(check.column, value, total_requested)
        if value != check.expected:
            wrong.append(f"{check.what} {check.column}: memtrace {value!r}, tfprof {check.expected!r} "
                         f"({SOURCES[name]}tfprof_{check.where})")
    return wrong


# -- the tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_fixtures_are_tensorflows_bytes(name: str) -> None:
    assert hashlib.sha256((TFPROF / name).read_bytes()).hexdigest() == SHA256[name]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("name", NAMES)
def test_memtrace_has_every_number_tfprofs_tests_expect(name: str, reader: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    rows, trace = _read(reader, TFPROF / name, tmp_path, monkeypatch, capsys)
    assert _disagreements(name, _found(rows, trace), with_times=trace is not None) == []


def test_the_checks_cover_each_fixture() -> None:
    """Every fixture has tfprof's per-node bytes checked, and the GPU ones the times and the op view too."""
    for name in NAMES:
        columns = {check.column for check in EXPECTED[name]}
        assert "output_bytes" in columns and "device" in columns
    for name in (AUG2017, CURRENT):
        columns = {check.column for check in EXPECTED[name]}
        assert set(BYTES) | {"occurrences", "cpu_exec_micros", "accelerator_exec_micros", "requested_share"} <= columns
        assert any(check.what.startswith("type:") for check in EXPECTED[name])


def test_tfprof_of_2016_counted_outputs_where_memtrace_counts_allocations() -> None:
    """Why the 2016 and 2017-03 checks read memtrace's output_bytes: the variables allocated nothing
    in the step (no total_bytes), but tfprof of then called their outputs' bytes requested."""
    rows = {r.name: r for r in node_rows(reference(TFPROF / SEP2016))}
    assert (rows["DW"].requested_bytes, rows["DW"].output_bytes) == (0, 648)
    assert (rows["Conv2D"].requested_bytes, rows["Conv2D"].output_bytes) == (432, 432)


@pytest.mark.parametrize("name", NAMES)
def test_todays_tfprof_agrees_node_for_node(name: str) -> None:
    """TensorFlow's profiler as installed (TF 2.x), given the run_meta alone: memtrace has its bytes, run
    counts and times on every node, the old traces included (with today's meaning of requested)."""
    _, config_pb2, _ = tensorflow_protos()
    import tensorflow as tf

    run_meta = config_pb2.RunMetadata()
    run_meta.ParseFromString((TFPROF / name).read_bytes())
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    options = (
        builder(builder.time_and_memory(min_micros=0, min_bytes=0, min_accelerator_micros=0, min_cpu_micros=0,
                                        min_peak_bytes=0, min_residual_bytes=0, min_output_bytes=0))
        .with_max_depth(10**6)
        .with_empty_output()
        .select(["bytes", "peak_bytes", "residual_bytes", "output_bytes", "occurrence", "micros",
                 "accelerator_micros", "cpu_micros"])
        .build()
    )
    root = tf.compat.v1.profiler.profile(graph=tf.Graph(), run_meta=run_meta, cmd="graph", options=options)
    columns = ("requested_bytes", "peak_bytes", "residual_bytes", "output_bytes", "occurrences",
               "accelerator_exec_micros", "cpu_exec_micros")
    theirs: dict[str, tuple[int, ...]] = {}
    stack = list(root.children)
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        theirs[node.name] = (node.requested_bytes, node.peak_bytes, node.residual_bytes, node.output_bytes,
                             node.run_count, node.accelerator_exec_micros, node.cpu_exec_micros)
    trace = fast(TFPROF / name)
    assert trace is not None
    found = _found([dataclasses.asdict(row) for row in node_rows(trace)], trace)
    ours = {n: tuple(found[n][c] for c in columns) for n in found if not n.startswith("type:")}
    assert ours == theirs
    assert tuple(_value(found, "*", c) for c in columns) == (
        root.total_requested_bytes, root.total_peak_bytes, root.total_residual_bytes, root.total_output_bytes,
        root.total_run_count, root.total_accelerator_exec_micros, root.total_cpu_exec_micros)
