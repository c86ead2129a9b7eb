"""decode_state and decode_loader_state: the one place a saved state's format is told."""

from __future__ import annotations

import json

import pytest

import grainfn as grain
from grainfn import fn
from grainfn._src.core.state_codec import StateCodec
from grainfn._src.grain_states.decoding import decode_loader_state, decode_state


def test_a_dataset_state_in_either_format() -> None:
    codec = StateCodec(fn.limit(5, fn.from_dataset(fn.range(9))))
    record = fn.LimitState(2, fn.DatasetPosition(2))
    assert decode_state(codec, codec.encode(record)) == record
    assert decode_state(codec, {"parent": {"next_index": 2}, "count_elements_read": 2}) == record
    with pytest.raises(ValueError, match="count_elements_read"):
        decode_state(codec, {"parent": {"next_index": 2}})


def loader() -> grain.DataLoader:
    return grain.DataLoader(
        data_source="abcdefgh", sampler=grain.samplers.SequentialSampler(8), worker_count=0
    )


def test_a_loader_state_in_each_of_its_formats() -> None:
    it = iter(loader())
    next(it), next(it), next(it)
    ours, grains = it.get_state(), it.grain_state()
    core = it.dataset_iterator.core
    codec, identity = StateCodec(core.stream), loader().identity()
    shard = loader().shard_options
    for state in (ours, json.loads(ours), grains):
        assert decode_loader_state(codec, state, identity, "abcdefgh", shard) == core.state


def test_a_state_of_another_loader_or_no_loader_is_refused_naming_what_differs() -> None:
    it = iter(loader())
    core = it.dataset_iterator.core
    codec, identity, shard = StateCodec(core.stream), loader().identity(), loader().shard_options
    other = json.loads(it.get_state())
    other["sampler"] = "SequentialSampler(num_records=9)"
    with pytest.raises(ValueError, match="another DataLoader: its sampler is"):
        decode_loader_state(codec, other, identity, "abcdefgh", shard)
    with pytest.raises(ValueError, match=r"not a DataLoader state.*got fields \['x'\]"):
        decode_loader_state(codec, {"x": 1}, identity, "abcdefgh", shard)
    with pytest.raises(ValueError, match="not valid JSON"):
        decode_loader_state(codec, b"{", identity, "abcdefgh", shard)
    with pytest.raises(TypeError, match=r"JSON bytes from get_state\(\), got int"):
        decode_loader_state(codec, 3, identity, "abcdefgh", shard)
