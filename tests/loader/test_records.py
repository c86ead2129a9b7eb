"""The loader's records (grainfn/_src/loader/records.py): their metadata and generators."""

from __future__ import annotations

import pickle

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import grainfn
import grainfn as grain
import grainfn.python


def test_records_pickle_with_their_generator() -> None:
    meta = grain.RecordMetadata(3, 4)
    assert meta.rng is None
    record = grain.Record(grain.python.RecordMetadata(1, 2), {"x": 1})
    assert pickle.loads(pickle.dumps(record)).data == {"x": 1}
    sampler = grain.IndexSampler(10, shuffle=True, num_epochs=1, seed=5)
    original = sampler[3]
    copied = pickle.loads(pickle.dumps(original))
    assert copied.rng.random() == original.rng.random()


@given(key=st.integers(0, 2**70))
def test_the_records_generator_is_philox_with_the_key(key: int) -> None:
    meta = grain.RecordMetadata.seeded(0, 0, key)
    expected = np.random.Generator(np.random.Philox(key=key))
    assert (
        meta.rng.integers(1 << 62, size=4).tolist() == expected.integers(1 << 62, size=4).tolist()
    )
    assert meta.rng.random() == expected.random()


def test_record_metadata_names_the_bit_generator_it_holds() -> None:
    import grain

    pcg = np.random.Generator(np.random.PCG64(1))
    ours = grainfn.RecordMetadata(index=3, record_key=5, rng=pcg)
    assert repr(ours) == "RecordMetadata(index=3, record_key=5, rng=Generator(PCG64))"
    theirs = repr(grain.RecordMetadata(index=3, record_key=5, rng=pcg))
    assert theirs.startswith("RecordMetadata(index=3, record_key=5, rng=Generator(PCG64) at ")
    none = grainfn.RecordMetadata(index=3, record_key=5, rng=None)
    assert repr(none) == repr(grain.RecordMetadata(index=3, record_key=5, rng=None))
