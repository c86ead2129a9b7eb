"""The saved form of an elastic host's state: encoding, merging the hosts' files, decoding."""

from __future__ import annotations

from typing import Any

import pytest

from grainfn import fn
from grainfn._src.elastic import states
from grainfn._src.elastic.stream import elastic_batches


def saved_state(**changes: Any) -> dict[str, Any]:
    """The saved form of a fresh two-shard, one-host elastic stream, with `changes`."""
    stream = elastic_batches(4, fn.range(16), num_logical_shards=2)
    return dict(states.ElasticCodec(stream).encode(stream.init()), **changes)


def test_a_state_says_the_step_and_the_state_of_each_shard() -> None:
    stream = elastic_batches(4, fn.range(16), num_logical_shards=2, host=1, num_hosts=2)
    iterator = fn.iterate(stream)
    next(iterator)
    saved = states.ElasticCodec(stream).encode(iterator.state)
    assert saved["step"] == 1 and saved["num_logical_shards"] == 2
    assert list(saved["shards"]) == ["1"]
    assert saved["shards"]["1"]["state"] == {"kind": "DatasetPosition", "position": 2}
    assert fn.state_to_dict(stream, iterator.state)["state"]["kind"] == "ElasticState"


def test_merging_refuses_a_shard_saved_twice_and_files_of_two_steps() -> None:
    stream = elastic_batches(4, fn.range(16), num_logical_shards=2)
    saved = states.ElasticCodec(stream).encode(stream.init())
    with pytest.raises(ValueError, match="Logical shard 0 is in two state files, a and b"):
        states.merge([("a", saved), ("b", saved)])
    later = dict(saved, step=3, shards={})
    with pytest.raises(ValueError, match="disagree on step"):
        states.merge([("a", saved), ("b", later)])
    with pytest.raises(ValueError, match="is not the state of an elastic iterator"):
        states.merge([("a", {"global_next_index": 3})])
    with pytest.raises(ValueError, match="elastic state version 7"):
        states.merge([("a", dict(saved, elastic=7))])


def test_decoding_refuses_another_layout_and_a_missing_shard() -> None:
    stream = elastic_batches(4, fn.range(16), num_logical_shards=2)
    codec = states.ElasticCodec(stream)
    saved = codec.encode(stream.init())
    other = states.ElasticCodec(elastic_batches(8, fn.range(16), num_logical_shards=2))
    with pytest.raises(ValueError, match="saved with global_batch_size=4"):
        other.decode(saved)
    with pytest.raises(ValueError, match="holds logical shards 0, but this host runs 0, 1: 1"):
        codec.decode(dict(saved, shards={"0": saved["shards"]["0"]}))
    elsewhere = states.ElasticCodec(elastic_batches(4, fn.range(17), num_logical_shards=2))
    with pytest.raises(ValueError, match="Logical shard 0: State belongs to another pipeline"):
        elsewhere.decode(saved)


def test_encoding_then_decoding_gives_the_state_back() -> None:
    stream = elastic_batches(4, fn.range(16), num_logical_shards=2)
    iterator = fn.iterate(stream)
    next(iterator)
    codec = states.ElasticCodec(stream)
    assert codec.decode(codec.encode(iterator.state)) == iterator.state


def test_the_codec_takes_only_an_elastic_host_stream() -> None:
    with pytest.raises(TypeError, match="ElasticCodec takes an elastic host stream, got"):
        states.ElasticCodec(fn.from_dataset(fn.range(4)))


def test_merging_the_files_of_all_hosts_gives_every_shard() -> None:
    halves = [
        elastic_batches(4, fn.range(16), num_logical_shards=2, host=h, num_hosts=2)
        for h in range(2)
    ]
    saved = [
        (f"process_{h}-of-2.json", states.ElasticCodec(s).encode(s.init()))
        for h, s in enumerate(halves)
    ]
    merged = states.merge(saved)
    assert sorted(merged["shards"]) == ["0", "1"]
    assert merged == saved_state()  # what one host running both shards saves


def test_merging_names_the_file_that_should_hold_a_missing_shard() -> None:
    with pytest.raises(ValueError, match="No state file to restore an elastic iterator from"):
        states.merge([])
    one = saved_state(shards={"0": saved_state()["shards"]["0"]})
    with pytest.raises(
        ValueError, match=r"Logical shard 1 of 2 is in no state file: it was process_0-of-1\.json's"
    ):
        states.merge([("process_0-of-1.json", one)])
    with pytest.raises(ValueError, match="Logical shard 1 of 2 is in none of the state files a"):
        states.merge([("a", one)])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], r"S is not the state of an elastic iterator \(keys list\)"),
        ({"step": 1}, r"S is not the state of an elastic iterator \(keys \['step'\]\)"),
        ({"elastic": 1, "global_batch_size": 4}, "S is truncated: key 'num_logical_shards'"),
        (saved_state(step=-1), r"S holds step=-1 \(int\); it must be an integer >= 0"),
        (
            saved_state(global_batch_size=0),
            r"S holds global_batch_size=0 \(int\); it must be an integer >= 1",
        ),
        (saved_state(stopped="no"), r"S holds stopped='no' \(str\); it must be true or false"),
        (saved_state(shards={"2": {}}), r'S holds shards=.*\("0" to "1"\)'),
        (saved_state(shards={"01": {}}), "S holds shards="),
        (saved_state(shards=[]), "S holds shards="),
    ],
)
def test_check_form_names_what_is_wrong(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        states.check_form(data, "S")


def test_check_form_accepts_a_saved_state() -> None:
    states.check_form(saved_state(), "S")  # raises nothing
    assert saved_state()["elastic"] == states.ELASTIC_VERSION
