"""Our .proto must say exactly what TensorFlow's says, field for field, under our own package."""

from __future__ import annotations

import pytest

from memtrace.read._proto import tf_trace_pb2 as ours

from .conftest import require, tensorflow_protos


def _walk(descriptor, seen):
    if descriptor.full_name in seen:
        return
    seen[descriptor.full_name] = descriptor
    for field in descriptor.fields:
        if field.message_type is not None:
            _walk(field.message_type, seen)


def _message_pairs():
    _step_stats_pb2, config_pb2, graph_pb2 = tensorflow_protos()
    theirs: dict = {}
    for root in (config_pb2.RunMetadata.DESCRIPTOR, graph_pb2.GraphDef.DESCRIPTOR):
        _walk(root, theirs)
    return theirs


def test_package_is_not_tensorflows() -> None:
    assert ours.StepStats.DESCRIPTOR.full_name == "memtrace.tf.StepStats"
    assert ours.DESCRIPTOR.name == "memtrace/read/_proto/tf_trace.proto"


def test_every_tensorflow_field_is_declared_with_same_number_and_type() -> None:
    theirs = _message_pairs()
    assert "tensorflow.NodeExecStats" in theirs and "tensorflow.AllocationRecord" in theirs
    pool = ours.DESCRIPTOR.pool
    checked = 0
    for full_name, their_message in theirs.items():
        mine = pool.FindMessageTypeByName(full_name.replace("tensorflow.", "memtrace.tf.", 1))
        assert {f.name for f in mine.fields} == {f.name for f in their_message.fields}, full_name
        for their_field in their_message.fields:
            my_field = mine.fields_by_name[their_field.name]
            assert my_field.number == their_field.number, (full_name, their_field.name)
            assert my_field.type == their_field.type, (full_name, their_field.name)
            assert my_field.is_repeated == their_field.is_repeated, (full_name, their_field.name)
            if their_field.message_type is not None:
                assert my_field.message_type.name == their_field.message_type.name
            checked += 1
    assert checked > 150


@pytest.mark.parametrize("enum_name", ["DataType"])
def test_enum_values_match(enum_name: str) -> None:
    types_pb2 = require("tensorflow.core.framework.types_pb2")
    theirs = {v.name: v.number for v in getattr(types_pb2, enum_name).DESCRIPTOR.values}
    mine = {v.name: v.number for v in getattr(ours, enum_name).DESCRIPTOR.values}
    assert mine == theirs


def test_both_schemas_load_in_one_process() -> None:
    step_stats_pb2, _, _ = tensorflow_protos()
    text = 'dev_stats { device: "/cpu:0" node_stats { node_name: "a" all_start_micros: 5 } }'
    from google.protobuf import text_format

    mine = text_format.Parse(text, ours.StepStats())
    theirs = text_format.Parse(text, step_stats_pb2.StepStats())
    assert mine.SerializeToString() == theirs.SerializeToString()
