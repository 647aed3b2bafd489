"""Keras layers and training phases from TensorFlow node names: who in the model holds the bytes.

Under ``Model.fit`` and ``train_on_batch`` every node name is a graph name: wrapped in
``StatefulPartitionedCall/``, gradients under ``gradient_tape/``, the optimizer's ops under its
own scope (``adam/Sqrt_9``), and every Keras name scope with a suffix TensorFlow added to make it
unique (the model ``sequential`` is the scope ``sequential_1``, its layer ``dense_1`` the scope
``dense_1_2``). :func:`layer_of` reads a name back into the layer as the user named it and the
phase of the step it belongs to:

- ``forward``: under the model's scope, the layer is the scope below it;
- ``backward``: the same under ``gradient_tape/``;
- ``optimizer``: under the optimizer's scope (``adam``, ``sgd``, ... or the name a layer-names
  file gives), the layer is the optimizer;
- ``other``: what no layer owns (the loss, the step counter, data, casts), the layer is the
  first scope of the name, or ``(no layer)``.

Wrappers go first: ``StatefulPartitionedCall``/``PartitionedCall`` scopes (with their ``_N``)
anywhere in the name, and the scopes TensorFlow's graph optimizer (Grappler) puts before the names
of the nodes it makes (``ConstantFolding/gradient_tape/...`` is a node of the backward pass that
constant folding rewrote); a ``while`` loop's body, which repeats the path to the loop
(``lstm_1/while/body/_1/sequential_1/lstm_1/...``), belongs to the outer layer. Without a
layer-names file one ``_N`` suffix is taken off the model's and the layer's scope (what Keras's
scopes add under ``tf.function``); with one (:func:`load_layer_names`) a scope is the known name
it spells, with or without that suffix.

The layer ``(input data)``, where the names show a Keras model: the batch its layers run on is the
most common leading dimension of their outputs' shapes (:func:`batch_size`), and the data handed to
them is what the sizes say is a batch of samples (:func:`input_data_of`): a chunk no op asked for
(``(no op)``: TensorFlow copied a value from Python, such as the numpy array ``model.fit`` or
``train_on_batch`` was given) whose requested bytes are a whole number of bytes per sample, at least
four (the inputs, the labels, the whole data set ``model.fit`` copies; scalars of 4 to 16 bytes are
not), or the output of an op in no scope at all (the input pipeline's, ``tf.data``'s ``GatherV2``)
of rank 2 or more whose leading dimension is the batch.

The layer-names file is ``layers.json`` in the profile's directory (or ``NAME.layers.json``
beside ``NAME.xplane.pb``): ``{"model": "sequential", "layers": ["dense", "dense_1"],
"optimizer": "adam"}``; every key is optional. A recorder that knows the model writes it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..errors import UsageError
from .data import NO_OP, TraceData

PHASES = ("forward", "backward", "optimizer", "other")
NO_LAYER = "(no layer)"
INPUT_DATA = "(input data)"
LAYER_NAMES_FILE = "layers.json"

_WRAPPER = re.compile(r"^(Stateful)?PartitionedCall(_\d+)?$|^__inference_.*$|^__forward_.*$|^__backward_.*$"
                      r"|^(ConstantFolding|ArithmeticOptimizer|DependencyOptimizer)$")
_SUFFIX = re.compile(r"_\d+$")
_OPTIMIZERS = re.compile(
    r"^(adam|adamw|adamax|nadam|sgd|rmsprop|adagrad|adadelta|adafactor|ftrl|lion|lamb|loss_scale_optimizer)(_\d+)?$",
    re.IGNORECASE)
_GRADIENTS = ("gradient_tape", "gradients")


@dataclass(frozen=True)
class LayerNames:
    """What a recorder knew of the model: its name, its layers' names, its optimizer's name."""

    model: str | None = None
    layers: tuple[str, ...] = ()
    optimizer: str | None = None
    path: str | None = None  # the file it came from


@dataclass(frozen=True)
class LayerPhase:
    layer: str
    phase: str  # one of PHASES


def load_layer_names(trace_path: str) -> LayerNames | None:
    """The layer-names file that goes with a profile, or None where there is none.

    Looked for as ``NAME.layers.json`` beside ``NAME.xplane.pb[.gz]`` and as ``layers.json`` in the
    profile's directory (or in the directory given). A file that is there but wrong is a
    UsageError naming it.
    """
    base = os.fspath(trace_path)
    if not os.path.exists(base):  # standard input, or a path no longer there: no directory to look in
        return None
    for candidate in layer_names_files(base):
        if os.path.isfile(candidate):
            return parse_layer_names(candidate)
    return None


def layer_names_files(trace_path: str) -> list[str]:
    """Where the layer-names file of a trace may be, in the order looked: ``NAME.layers.json`` beside
    ``NAME.xplane.pb[.gz]``, ``layers.json`` in its directory (in the directory itself, for a directory).
    They are inputs: no output may replace one."""
    if os.path.isdir(trace_path):
        return [os.path.join(trace_path, LAYER_NAMES_FILE)]
    stem = re.sub(r"\.xplane\.pb(\.gz)?$", "", trace_path)
    return ([f"{stem}.{LAYER_NAMES_FILE}"] if stem != trace_path else []) + [
        os.path.join(os.path.dirname(trace_path), LAYER_NAMES_FILE)]


def parse_layer_names(path: str) -> LayerNames:
    """Read one layer-names file; every way it can be wrong is a UsageError naming it."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except OSError as error:
        raise UsageError(f"{path}: cannot read the layer names: {error.strerror or error}") from None
    except ValueError:  # not UTF-8, not JSON, or a number of thousands of digits (int() refuses those)
        raise UsageError(f"{path}: not a layer-names file (JSON with model, layers, optimizer)") from None
    except RecursionError:  # arrays or objects nested thousands deep
        raise UsageError(f"{path}: not a layer-names file: nested too deeply") from None
    if not isinstance(document, dict):
        raise UsageError(f"{path}: not a layer-names file: expected a JSON object with model, layers, optimizer")
    model, layers, optimizer = document.get("model"), document.get("layers", []), document.get("optimizer")
    if not (model is None or isinstance(model, str)) or not (optimizer is None or isinstance(optimizer, str)):
        raise UsageError(f"{path}: model and optimizer must be strings")
    if not isinstance(layers, list) or not all(isinstance(n, str) for n in layers):
        raise UsageError(f"{path}: layers must be a list of names")
    return LayerNames(model, tuple(layers), optimizer, path)


def strip_wrappers(name: str) -> list[str]:
    """The node name's scopes (and op, last) with the function-call wrappers TensorFlow adds left out."""
    parts = name.split(":", 1)[0].split("/")
    return [p for p in parts[:-1] if not _WRAPPER.match(p)] + parts[-1:]


def layer_of(name: str, names: LayerNames | None = None) -> LayerPhase:
    """The Keras layer (as the user named it) and the phase of the step a node name belongs to."""
    parts = strip_wrappers(name)
    scopes, phase = parts[:-1], "forward"
    if scopes and scopes[0] in _GRADIENTS:
        scopes, phase = scopes[1:], "backward"
    if not scopes:
        return LayerPhase(NO_LAYER, "other")
    first = scopes[0]
    if phase == "forward" and _is_optimizer(first, names):
        return LayerPhase(first, "optimizer")
    if _is_model(first, names) and len(scopes) >= 2:
        return LayerPhase(_user_name(scopes[1], names.layers if names else ()), phase)
    if phase == "backward":
        return LayerPhase(_user_name(first, names.layers if names else ()), phase)
    return LayerPhase(first, "other")


def input_data_of(node: str, requested_bytes: int | None, shape: list[int] | None,
                  batch: int | None) -> LayerPhase | None:
    """``(input data)`` in phase other where the sizes say an allocation holds samples of ``batch`` (see the
    module's docstring): no op's, a whole number of bytes per sample (at least four); or a scopeless op's,
    of rank 2 or more and ``batch`` long. None otherwise, and where ``batch`` is None."""
    name = node.split(":", 1)[0]
    if not batch:
        return None
    if name == NO_OP:
        known = requested_bytes is not None and requested_bytes >= 4 * batch and requested_bytes % batch == 0
        return LayerPhase(INPUT_DATA, "other") if known else None
    if "/" not in name and shape is not None and len(shape) >= 2 and shape[0] == batch:
        return LayerPhase(INPUT_DATA, "other")
    return None


def batch_size(trace: TraceData, names: LayerNames | None = None) -> int | None:
    """The batch a Keras model's layers run on: the most common leading dimension of the shapes (rank 2
    or more) of the outputs of the forward and backward passes' layers; None where no such output has a
    known shape, or where the names show no Keras model (:func:`shows_keras`). Ties go to the larger."""
    if not shows_keras(trace.strings[int(code)] for code in np.unique(trace.nodes.name).tolist()):
        return None
    outputs = trace.outputs
    shaped = np.flatnonzero(outputs.rank >= 2)
    leading = outputs.shape_dims[outputs.shape_offsets[shaped]]
    names_of = trace.nodes.name[outputs.node[shaped]]  # string codes: one layer_of per distinct name
    codes, where = np.unique(names_of, return_inverse=True)
    in_a_layer = np.array([_in_a_layer(trace.strings[int(code)], names) for code in codes.tolist()], dtype=bool)
    kept = leading[in_a_layer[where] & (leading >= 1)] if len(shaped) else leading
    if not len(kept):
        return None
    dims, counts = np.unique(kept, return_counts=True)
    best = max(zip(counts.tolist(), dims.tolist()))  # the most common; a tie to the larger
    return int(best[1])


def _in_a_layer(node: str, names: LayerNames | None) -> bool:
    where = layer_of(node, names)
    return where.phase in ("forward", "backward") and where.layer != NO_LAYER


def op_in_layer(name: str, names: LayerNames | None = None) -> str:
    """A node's name within its layer, what tells its ops apart there: ``moments/sub`` of
    ``StatefulPartitionedCall/gradient_tape/smallcnn_1/bn1_1/moments/sub`` (backward, layer ``bn1``);
    the wrappers, the gradient scope, the model's and the layer's (or optimizer's) scopes left out."""
    parts = strip_wrappers(name)
    scopes, op = parts[:-1], parts[-1]
    if scopes and scopes[0] in _GRADIENTS:
        scopes = scopes[1:]
    where = layer_of(name, names)
    if scopes and where.layer != NO_LAYER:
        drop = 2 if len(scopes) >= 2 and _is_model(scopes[0], names) and where.phase != "optimizer" else 1
        scopes = scopes[drop:] if where.phase in ("forward", "backward") else scopes[1:]
    return "/".join([*scopes, op])


def _is_optimizer(scope: str, names: LayerNames | None) -> bool:
    if names is not None and names.optimizer is not None:
        return scope == names.optimizer
    return bool(_OPTIMIZERS.match(scope))


def _is_model(scope: str, names: LayerNames | None) -> bool:
    """A model's scope: the named model (with or without one suffix), else any scope that holds layers."""
    if names is not None and names.model is not None:
        return scope == names.model or _SUFFIX.sub("", scope) == names.model
    return scope not in ("compile_loss", "loss") and not scope.startswith(("compile_", "metrics"))


def _user_name(scope: str, known: tuple[str, ...]) -> str:
    """A layer's scope as the user named the layer: one ``_N`` off, unless the names known say otherwise."""
    stripped = _SUFFIX.sub("", scope)
    if known:
        if stripped in known:
            return stripped
        if scope in known:
            return scope
    return stripped


def shows_keras(names: Iterable[str]) -> bool:
    """Whether node names come from a Keras model run as a function (``Model.fit``, ``train_on_batch``,
    a ``tf.function`` with a ``GradientTape``): some name has a function-call wrapper
    (``StatefulPartitionedCall/``) or a ``gradient_tape/`` scope. TF1 graphs have neither."""
    for name in names:
        parts = name.split(":", 1)[0].split("/")
        if any(_WRAPPER.match(p) for p in parts[:-1]) or _GRADIENTS[0] in parts[:-1]:
            return True
    return False


def scope_of(name: str, depth: int | None = None, layers: bool = False) -> str:
    """A node name's scope for ``--group-by scope[:DEPTH]``, the function-call wrappers left out.

    With a ``depth``: the first ``depth`` levels (the op's name itself where the name has fewer
    scopes). Without one, 1 level, or where ``layers`` (the names show a Keras model,
    :func:`shows_keras`) the depth that lands on layers: the model's scope and the layer's below it
    (``sequential_1/dense_1``), under ``gradient_tape/`` for the backward pass; a scope that is no
    model's (the optimizer's ``adam``, the loss's) is cut at its first level.
    """
    parts = strip_wrappers(name)
    if depth is not None or not layers:
        return "/".join(parts[: depth or 1])
    scopes = parts[:-1]
    lead = scopes[:1] if scopes and scopes[0] in _GRADIENTS else []
    rest = scopes[len(lead):]
    keep = 2 if rest and not _is_optimizer(rest[0], None) and _is_model(rest[0], None) else 1
    return "/".join(lead + rest[:keep]) or parts[-1]

