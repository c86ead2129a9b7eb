"""The block form of `to_jax`: `JaxDataset.scan` and `JaxDataset.steps`.

They resolve the addresses of many steps at once and must give exactly what
a scan over `step` gives: the same elements, and the same state after any
number of steps, for any block size, from any state, across epochs.
"""

from __future__ import annotations

import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from device.modes import exact_mode
from hypothesis import given, settings
from hypothesis import strategies as st

from grainfn import fn, testing
from grainfn._src.device.dataset import _scan_compiled as scan_programs
from grainfn.fn import DatasetPosition, EpochPosition


def host_run(jds: Any, start: int, count: int) -> tuple[list[Any], DatasetPosition]:
    """`count` elements of the host twin from position `start`, and its state after them."""
    iterator = fn.iterate(jds.stream, DatasetPosition(start))
    elements = list(itertools.islice(iterator, count))
    return elements, iterator.state


def assert_rows_equal(device: Any, host: list[Any]) -> None:
    """Row j of every leaf of `device` is element j of `host`."""
    assert jax.tree_util.tree_leaves(device)[0].shape[0] == len(host)
    for j, element in enumerate(host):
        row = jax.tree_util.tree_map(lambda leaf, j=j: np.asarray(leaf[j]), device)
        assert jax.tree_util.tree_structure(row) == jax.tree_util.tree_structure(
            jax.tree_util.tree_map(np.asarray, element)
        )
        for got, want in zip(jax.tree_util.tree_leaves(row), jax.tree_util.tree_leaves(element)):
            np.testing.assert_array_equal(got, np.asarray(want), err_msg=f"step {j}")


def keep(carry: Any, element: Any) -> tuple[Any, Any]:
    return carry + 1, element


def addressable_steps(ds: Any, start: int, count: int) -> int:
    """How many of `count` steps from `start` the host reads (an endless stage's later
    epochs pass 2**63 - 1 there)."""
    for step in range(count):
        try:
            ds.get(start + step)
        except OverflowError:
            return step
    return count


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(
    ds=testing.device_datasets(),
    epoch=st.sampled_from([0, 1, 5]),
    offset=st.integers(0, 10**6),
    count=st.integers(0, 23),
    block=st.one_of(st.none(), st.integers(1, 9)),
)
def test_scan_gives_the_steps_elements_and_state_for_any_block(
    ds: Any, epoch: int, offset: int, count: int, block: int | None
) -> None:
    with exact_mode(ds):
        jds = fn.to_jax(ds)
        start = (epoch if ds.length < 2**40 else 0) * jds.period + offset % min(jds.period, 10**6)
        count = addressable_steps(ds, start % ds.length + start // ds.length * ds.length, count)
        state = jds.device_state(DatasetPosition(start))
        run = jax.jit(lambda jds, state: jds.scan(keep, 0, state, count, block=block))
        steps_taken, after, elements = run(jds, state)
        host, host_state = host_run(jds, start, count)
        assert int(steps_taken) == count
        assert_rows_equal(elements, host)
        assert jds.host_state(after) == host_state
        if count:
            stacked, stacked_after = jax.jit(jds.steps, static_argnums=1)(state, count)
            assert_rows_equal(stacked, host)
            assert jds.host_state(stacked_after) == host_state


@pytest.mark.slow
def test_the_state_is_exact_after_every_step_whatever_the_block() -> None:
    ds = fn.batch(3, fn.shuffle(fn.source(np.arange(21, dtype=np.float32)), seed=2))
    jds = fn.to_jax(ds)  # 7 batches per epoch
    start = jds.device_state(DatasetPosition(5))
    for count in range(0, 17):
        for block in (1, 2, 3, 4, 16):
            _, after, _ = jds.scan(keep, 0, start, count, block=block)
            assert jds.host_state(after) == DatasetPosition(5 + count), (count, block)
            assert isinstance(after, EpochPosition)
            assert (int(after.epoch), int(after.offset)) == divmod(5 + count, 7)


def test_no_steps_give_the_carry_the_state_and_empty_ys() -> None:
    jds = fn.to_jax(fn.batch(2, fn.source({"x": np.ones((8, 3), np.float32)})))
    carry, after, ys = jds.scan(keep, 7, jds.init(), 0)
    assert int(carry) == 7
    assert jds.host_state(after) == DatasetPosition(0)
    assert ys["x"].shape == (0, 2, 3)


@pytest.mark.slow
@pytest.mark.parametrize("x64", [False, True])
def test_blocks_cross_the_boundaries_of_endless_and_32_bit_states(x64: bool) -> None:
    with jax.enable_x64(x64):
        # An endless repeat: period 2**31, so the block crosses from epoch 0 to epoch 1.
        endless = fn.batch(4, fn.repeat(None, fn.shuffle(fn.range(1000), seed=5)))
        jds = fn.to_jax(endless)
        start = 2**31 - 3
        _, after, elements = jax.jit(lambda jds, state: jds.scan(keep, 0, state, 7, block=4))(
            jds, jds.device_state(DatasetPosition(start))
        )
        host, host_state = host_run(jds, start, 7)
        assert_rows_equal(elements, host)
        assert jds.host_state(after) == host_state
        assert (int(after.epoch), int(after.offset)) == (1, 4)
        # A finite dataset in a late epoch: positions past 2**31 in 32-bit mode.
        ds = fn.shuffle(fn.range(100_003), seed=1)
        jds = fn.to_jax(ds)
        start = 30_000 * ds.length - 2
        _, after, elements = jds.scan(keep, 0, jds.device_state(DatasetPosition(start)), 5)
        host, host_state = host_run(jds, start, 5)
        assert_rows_equal(elements, host)
        assert jds.host_state(after) == host_state


def test_outside_jit_one_program_serves_each_body_length_and_block() -> None:
    jds = fn.to_jax(fn.batch(2, fn.shuffle(fn.range(10), seed=3)))
    programs = scan_programs._cache_size()
    first = jds.scan(keep, 0, jds.init(), 6, block=4)
    again = jds.scan(keep, 0, jds.device_state(DatasetPosition(0)), 6, block=4)
    assert scan_programs._cache_size() == programs + 1  # the second call compiled nothing
    jitted = jax.jit(lambda jds, state: jds.scan(keep, 0, state, 6, block=4))(jds, jds.init())
    for got in (first, again):
        assert jds.host_state(got[1]) == DatasetPosition(6)
        assert_rows_equal(got[2], host_run(jds, 0, 6)[0])
        assert int(got[0]) == int(jitted[0]) == 6
    with pytest.raises(ValueError, match="offset"):  # a concrete state is still checked
        jds.scan(keep, 0, EpochPosition(jnp.int32(0), jnp.int32(99)), 6, block=4)


class UnhashableBody:
    """A body that cannot be a key of the compiled programs (it defines `__eq__` only)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnhashableBody)

    def __call__(self, carry: Any, element: Any) -> tuple[Any, Any]:
        return carry + element.sum(), None


def test_an_unhashable_body_runs_outside_jit_all_the_same() -> None:
    jds = fn.to_jax(fn.batch(2, fn.range(10)))
    total, after, _ = jds.scan(UnhashableBody(), 0, jds.init(), 7, block=3)
    assert int(total) == sum(range(10)) + 0 + 1 + 2 + 3  # an epoch and two rows of the next
    assert jds.host_state(after) == DatasetPosition(7)


def test_a_block_holds_addresses_not_data() -> None:
    """The program's largest value is one step's data or one block's addresses, never a block
    of data: memory is bounded by the block of indices."""
    rows, width, batch, block = 256, 784, 8, 16
    images = np.ones((rows, width), np.float32)
    ds = fn.batch(batch, fn.shuffle(fn.source({"image": images}), seed=0))
    jds = fn.to_jax(ds)

    def train(total: Any, element: Any) -> tuple[Any, None]:
        return total + element["image"].sum(), None

    jaxpr = jax.make_jaxpr(lambda jds, state: jds.scan(train, 0.0, state, 64, block=block))(
        jds, jds.init()
    )
    sizes = [int(np.prod(aval.shape)) for aval in all_avals(jaxpr.jaxpr)]
    assert max(sizes) == rows * width  # the source itself, an input
    inner = [size for size in sizes if size != rows * width]
    assert max(inner) < block * batch * width  # no block of data
    assert batch * width in inner  # one step's data
    total, _, _ = jds.scan(train, 0.0, jds.init(), 64, block=block)
    assert float(total) == 64 * batch * width


def all_avals(jaxpr: Any) -> list[Any]:
    """The abstract values of every variable in `jaxpr` and the jaxprs inside it."""
    found = [v.aval for v in jaxpr.invars] + [v.aval for v in jaxpr.constvars]
    for equation in jaxpr.eqns:
        found += [v.aval for v in equation.outvars]
        for param in equation.params.values():
            for inner in param if isinstance(param, (list, tuple)) else [param]:
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    found += all_avals(inner)
    return [aval for aval in found if hasattr(aval, "shape")]


def test_the_default_block_holds_a_bounded_number_of_steps() -> None:
    from grainfn._src.device.dataset import BLOCK_BYTES

    jds = fn.to_jax(fn.batch(128, fn.shuffle(fn.range(2**20), seed=0)))
    assert jds._default_block(2**20) == BLOCK_BYTES // (128 * 4)
    assert jds._default_block(5) == 5


def test_steps_and_scan_refuse_counts_that_are_not_static_ints() -> None:
    jds = fn.to_jax(fn.range(10))
    for bad in (0, -1, 2.0, True, 2**31):
        with pytest.raises(ValueError, match=rf"steps got count={bad!r}; it must be a Python int"):
            jds.steps(jds.init(), bad)
    with pytest.raises(ValueError, match=r"scan got length=-1; it must be a Python int in \[0"):
        jds.scan(keep, 0, jds.init(), -1)
    with pytest.raises(ValueError, match=r"scan got block=0; it must be a Python int in \[1"):
        jds.scan(keep, 0, jds.init(), 3, block=0)
    with pytest.raises(TypeError, match="scan takes the EpochPosition"):
        jds.scan(keep, 0, DatasetPosition(0), 3)
    with pytest.raises(ValueError, match="EpochPosition field offset is 12"):
        jds.scan(keep, 0, EpochPosition(0, 12), 3)
    with pytest.raises(ValueError, match="steps got count"):
        jax.jit(jds.steps)(jds.init(), jnp.int32(3))
