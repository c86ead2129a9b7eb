"""fn.to_jax: the host's elements, order and states, computed by jax under jit."""

from __future__ import annotations

import contextlib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from device.modes import exact_mode
from hypothesis import given, settings
from hypothesis import strategies as st

from grainfn import fn, testing
from grainfn.fn import DatasetPosition, EpochPosition

MODES = {"32-bit": contextlib.nullcontext, "64-bit": lambda: jax.enable_x64(True)}


def assert_same_elements(device: Any, host: list[Any]) -> None:
    """Row j of every leaf of `device` equals element j of `host`, leaf for leaf."""
    for j, element in enumerate(host):
        row = jax.tree_util.tree_map(lambda leaf, j=j: leaf[j], device)
        assert jax.tree_util.tree_structure(row) == jax.tree_util.tree_structure(
            jax.tree_util.tree_map(np.asarray, element)
        ), (j, row, element)
        for got, want in zip(jax.tree_util.tree_leaves(row), jax.tree_util.tree_leaves(element)):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=f"row {j}")


def addressable(ds: Any, position: int) -> bool:
    """Whether the host reads `position` (a later epoch of an infinite stage passes 2**63 - 1)."""
    try:
        ds.get(position)
    except OverflowError:
        return False
    return True


def later_epochs(length: int, draw_offsets: list[int]) -> list[int]:
    """Positions of the first epochs and of later ones (epoch 7 and 1000)."""
    first = list(range(min(length, 24)))
    later = [7 * length + o % length for o in draw_offsets] + [1000 * length + length - 1]
    return first + [p for p in later if p < 2**31 - 1]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=15, deadline=None)
@given(ds=testing.device_datasets(), offsets=st.lists(st.integers(0, 10**6), max_size=6))
def test_get_many_under_jit_equals_the_host(mode: str, ds: Any, offsets: list[int]) -> None:
    with MODES[mode]():
        try:
            jds = fn.to_jax(ds)
        except OverflowError as error:  # refused, never wrong: only where 32 bits cannot hold it
            assert mode == "32-bit" and "jax_enable_x64" in str(error)
            return  # the 64-bit run of the same examples computes these
        positions = [p for p in later_epochs(min(ds.length, 10**6), offsets) if addressable(ds, p)]
        device = jax.jit(jds.get_many)(jnp.asarray(positions))
        assert_same_elements(device, ds.get_many(positions))


@settings(max_examples=10, deadline=None)
@given(ds=testing.device_datasets())
def test_a_scan_over_step_equals_host_iteration(ds: Any) -> None:
    with exact_mode(ds):
        scan_equals_host_iteration(ds)


def scan_equals_host_iteration(ds: Any) -> None:
    """A scan of `step` reads the host twin, the dataset repeated, across epoch boundaries."""
    jds = fn.to_jax(ds)
    steps = 2 * ds.length + 3 if ds.length <= 12 else 30
    # A later epoch of a stage over an endless one is past what the host addresses.
    steps = next((p for p in range(steps) if not addressable(ds, p)), steps)

    @jax.jit
    def run(state: EpochPosition) -> tuple[EpochPosition, Any]:
        def body(state: EpochPosition, _: Any) -> tuple[EpochPosition, Any]:
            element, state = jds.step(state)
            return state, element

        return jax.lax.scan(body, state, None, length=steps)

    state, elements = run(jds.init())
    iterator = fn.iterate(jds)  # fn.from_dataset(fn.repeat(None, ds))
    host = [next(iterator) for _ in range(steps)]
    assert_same_elements(elements, host)
    assert fn.state_to_dict(jds, state) == fn.state_to_dict(jds, iterator.state)


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(ds=testing.device_datasets(), data=st.data())
def test_states_move_host_to_device_to_host_at_any_position(ds: Any, data: Any) -> None:
    with exact_mode(ds):
        states_round_trip(ds, data)


def states_round_trip(ds: Any, data: Any) -> None:
    """Host dict -> device state -> a step -> dict -> the host goes on, in any epoch."""
    jds = fn.to_jax(ds)
    epoch = data.draw(st.sampled_from([0, 1, 5])) if ds.length < 2**40 else 0
    position = epoch * ds.length + data.draw(st.integers(0, min(ds.length, 200) - 1))
    if not addressable(ds, position):  # a later epoch of a stage over an endless one: past
        position %= ds.length  # what the host addresses, so the host cannot follow there
    iterator = fn.iterate(jds.stream, DatasetPosition(position))  # the dataset, repeated
    saved = fn.state_to_dict(jds.stream, iterator.state)  # host -> dict
    restored = fn.state_from_dict(jds, saved)  # dict -> a state the device steps
    assert isinstance(restored, EpochPosition)
    element, device_state = jax.jit(jds.step)(restored)
    assert_same_elements(jax.tree_util.tree_map(lambda x: x[None], element), [next(iterator)])
    assert fn.state_to_dict(jds, device_state) == fn.state_to_dict(jds.stream, iterator.state)
    if not addressable(ds, position + 1):
        return  # the next position is in such a later epoch
    # ... and the host carries on from the device's state.
    following, _ = jds.step(device_state)
    assert_same_elements(
        jax.tree_util.tree_map(lambda x: x[None], following),
        [next(fn.iterate(jds, device_state))],
    )


@pytest.mark.slow
def test_fori_loop_vmap_and_a_dataset_passed_into_jit() -> None:
    ds = fn.batch(4, fn.shuffle(fn.source(np.arange(40, dtype=np.float32)), seed=3))
    jds = fn.to_jax(ds)

    @jax.jit
    def total(jds: Any, steps: int) -> Any:
        def body(_: int, carry: tuple[Any, EpochPosition]) -> tuple[Any, EpochPosition]:
            acc, state = carry
            batch, state = jds.step(state)
            return acc + batch.sum(), state

        return jax.lax.fori_loop(0, steps, body, (jnp.float32(0), jds.init()))

    acc, state = total(jds, 10)
    assert float(acc) == sum(range(40))  # one epoch: every element once
    assert (int(state.epoch), int(state.offset)) == (1, 0)  # the 10 batches of epoch 0
    positions = jnp.array([0, 3, 17, 12345])
    np.testing.assert_array_equal(jax.vmap(jds.get)(positions), jds.get_many(positions))
    np.testing.assert_array_equal(jds.get_many(positions.reshape(2, 2))[1, 1], jds.get(12345))


@pytest.mark.slow
def test_sources_of_jax_arrays_and_dicts_of_arrays() -> None:
    images = jnp.arange(30, dtype=jnp.float32).reshape(10, 3)
    labels = np.arange(10, dtype=np.int32) % 3
    ds = fn.shuffle(fn.source({"image": images, "label": labels}), seed=1)
    assert_same_elements(fn.to_jax(ds).get_many(jnp.arange(25)), ds.get_many(range(25)))
    single = fn.repeat(None, fn.source(images))
    assert_same_elements(fn.to_jax(single).get_many(jnp.arange(13)), single.get_many(range(13)))


@pytest.mark.slow
def test_random_map_draws_depend_on_seed_and_position_alone() -> None:
    def noisy(x: Any, key: Any) -> Any:
        return x + jax.random.randint(key, (), 0, 10**6, dtype=jnp.int32)

    ds = fn.random_map(noisy, fn.shuffle(fn.range(10), seed=2), seed=9, rng="jax")
    jds = fn.to_jax(ds)
    positions = jnp.arange(25)
    many = jax.jit(jds.get_many)(positions)
    _, scanned = jax.lax.scan(lambda s, _: jds.step(s)[::-1], jds.init(), None, length=25)
    np.testing.assert_array_equal(many, scanned)
    np.testing.assert_array_equal(many[jnp.array([3, 17])], jds.get_many(jnp.array([3, 17])))
    parent = fn.shuffle(fn.range(10), seed=2).get_many(range(25))
    for p in (0, 3, 24):  # the documented key: the seed folded with epoch, high and low words
        key = jax.random.key(9)
        for word in (p // 10, 0, p % 10):
            key = jax.random.fold_in(key, word)
        draw = jax.random.randint(key, (), 0, 10**6, dtype=jnp.int32)
        assert int(many[p]) == parent[p] + int(draw)
    with jax.enable_x64(True):  # the same keys with 64-bit integers, so the same int32 draws
        np.testing.assert_array_equal(fn.to_jax(ds).get_many(positions), many)


def test_map_functions_see_jax_values_and_errors_name_the_stage() -> None:
    ds = fn.map(lambda x: float(x), fn.range(3))  # float() of a tracer fails
    with pytest.raises(jax.errors.ConcretizationTypeError) as info:
        jax.jit(fn.to_jax(ds).get_many)(jnp.arange(2))
    assert "<lambda>), traced by to_jax" in "".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: fn.filter(lambda x: x > 1, fn.range(5)), "filter"),
        (lambda: fn.flat_map(lambda x: [x, x], fn.range(5), max_fan_out=2), "flat_map"),
        (lambda: fn.from_dataset(fn.range(5)), r"stream stage 'from_dataset\(\)'"),
        (lambda: fn.source([1, 2, 3]), "numeric arrays"),
        (lambda: fn.source(np.arange(3.0)), "float64 would become float32"),
        (lambda: fn.batch(2, fn.range(5)), "Pass drop_remainder=True"),
        (lambda: fn.batch(2, fn.range(4), batch_fn=list), "batch_fn"),
        (lambda: fn.zip([fn.range(3), fn.range(3)]), "zip"),
        (lambda: fn.slice(slice(0, 0), fn.range(3)), "empty dataset"),
    ],
)
def test_stages_without_a_device_form_are_refused_by_name(make: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        fn.to_jax(make())


def test_a_selection_map_past_its_length_is_refused() -> None:
    class Endless:
        def __len__(self) -> int:
            return 4

        def __getitem__(self, index: int) -> tuple[int, int]:
            return index % 2, index

    ds = fn.select_from_datasets([fn.range(5), fn.range(10, 15)], Endless())
    with pytest.raises(TypeError, match="answers positions past its length 4"):
        fn.to_jax(ds)
    table = fn.select_from_datasets([fn.range(5), fn.range(10, 15)], [(1, 0), (0, 7), (1, 9)])
    assert_same_elements(fn.to_jax(table).get_many(jnp.arange(3)), table.get_many(range(3)))


def test_positions_are_checked_outside_jit() -> None:
    jds = fn.to_jax(fn.range(5))
    with pytest.raises(ValueError, match="positions must be >= 0, got -1"):
        jds.get_many([0, -1])
    with pytest.raises(TypeError, match="positions must be integers, got dtype float"):
        jds.get_many(np.array([0.5]))
    with pytest.raises(TypeError, match="step takes the EpochPosition"):
        jds.step(3)
    with pytest.raises(ValueError, match=r"field offset is 5; it must be an integer in \[0, 4\]"):
        jds.step(EpochPosition(0, 5))
    with jax.enable_x64(True), pytest.raises(ValueError, match=r"call fn\.to_jax again"):
        jds.get_many([0])


def test_a_map_dataset_of_the_grain_api_compiles_too() -> None:
    import grainfn as grain

    ds = grain.MapDataset.range(20).seed(4).shuffle().batch(5)
    jds = fn.to_jax(ds)
    assert_same_elements(jax.jit(jds.get_many)(jnp.arange(6)), [ds[i] for i in range(6)])
    with pytest.raises(TypeError, match="stream stage"):
        fn.to_jax(ds.to_iter_dataset())


@pytest.mark.slow
def test_random_map_seeds_past_32_bits_give_the_same_keys_in_both_modes() -> None:
    ds = fn.random_map(
        lambda x, key: jax.random.key_data(key), fn.range(3), seed=893247023984, rng="jax"
    )
    narrow = fn.to_jax(ds).get_many(jnp.arange(3))
    with jax.enable_x64(True):
        np.testing.assert_array_equal(fn.to_jax(ds).get_many(jnp.arange(3)), narrow)
        expected = jax.random.fold_in(jax.random.key(893247023984), 0)
    for word in (0, 0):
        expected = jax.random.fold_in(expected, word)
    np.testing.assert_array_equal(narrow[0], jax.random.key_data(expected))
    with pytest.raises(ValueError, match="random_map seed"):
        fn.random_map(lambda x, key: x, fn.range(3), seed=2**64, rng="jax")


@pytest.mark.parametrize(
    "items",
    [
        (
            np.arange(6, dtype=np.int32).reshape(3, 2),
            np.arange(10, 16, dtype=np.int32).reshape(3, 2),
        ),
        [np.full((2, 3), i, dtype=np.float32) for i in range(4)],  # images of 2 rows each
        [jnp.arange(3) * i for i in range(5)],
    ],
)
def test_a_list_or_tuple_source_is_read_item_by_item_on_device_as_on_the_host(items: Any) -> None:
    """`fn.source((xs, ys))` has 2 items, xs and ys, on both sides: never rows of both, and
    item 2 of a list of 2-row images is image 2, not row 2 (which a gather would clamp)."""
    ds = fn.source(items)
    jds = fn.to_jax(ds)
    positions = jnp.arange(len(items) * 2)  # the second epoch too
    device = jax.jit(jds.get_many)(positions)
    for position, element in zip(positions.tolist(), device):
        np.testing.assert_array_equal(element, ds.get(position))
    np.testing.assert_array_equal(jds.get(1), items[1])


def test_a_tuple_of_arrays_of_other_shapes_is_refused_pointing_to_a_dict_source() -> None:
    xs, ys = np.zeros((3, 2), np.int32), np.zeros(3, np.int32)
    with pytest.raises(TypeError, match=r"one item per entry on the host.*pass a dict"):
        fn.to_jax(fn.source((xs, ys)))
    rows = fn.to_jax(fn.source({"x": xs, "y": ys}))  # what was meant: rows of both
    assert jax.tree_util.tree_map(jnp.shape, rows.get(1)) == {"x": (2,), "y": ()}


@pytest.mark.parametrize(
    "array",
    [
        jnp.arange(6, dtype=jnp.bfloat16).reshape(3, 2),
        np.arange(4, dtype=jnp.bfloat16),  # an ml_dtypes array: numpy calls its kind "V"
        np.arange(5, dtype=np.uint8),
        np.arange(-3, 3, dtype=np.int8),
    ],
)
def test_bfloat16_and_small_integer_sources_run_on_device_in_their_dtype(array: Any) -> None:
    ds = fn.source(array)
    device = jax.jit(fn.to_jax(ds).get_many)(jnp.arange(len(array)))
    assert device.dtype == np.asarray(array).dtype
    for position in range(len(array)):
        host = np.asarray(ds.get(position))
        assert host.dtype == device.dtype
        np.testing.assert_array_equal(np.asarray(device[position]), host)


@contextlib.contextmanager
def prng_impl(name: str) -> Any:
    """jax's default PRNG set to `name` inside the block, as a user's config would set it."""
    previous = jax.config.jax_default_prng_impl
    jax.config.update("jax_default_prng_impl", name)
    try:
        yield
    finally:
        jax.config.update("jax_default_prng_impl", previous)


def raw_bits(x: Any, key: Any) -> Any:
    return jax.random.bits(key, (3,), jnp.uint32)


@pytest.mark.slow
@pytest.mark.parametrize("impl", ["threefry2x32", "rbg", "unsafe_rbg"])
def test_random_map_draws_depend_on_the_position_alone_whatever_the_prng_setting(
    impl: str,
) -> None:
    """Under any jax_default_prng_impl, an element's draws are the host's, whichever positions
    the device reads with it (rbg draws a vmapped batch's bits from its first key: random_map's
    keys are threefry2x32's, so they do not), in both integer modes."""
    seed = 2**40 + 7  # past 32 bits: the high word still counts

    def noisy(x: Any, key: Any) -> Any:
        return x + jax.random.uniform(key, (3,))

    with prng_impl(impl):
        ds = fn.random_map(noisy, fn.shuffle(fn.range(6), seed=1), seed=seed, rng="jax")
        jds = fn.to_jax(ds)
        host = np.stack([np.asarray(ds.get(p)) for p in range(12)])
        together = np.asarray(jax.jit(jds.get_many)(jnp.arange(12)))
        pairs = np.concatenate([np.asarray(jds.get_many(jnp.array([p, p + 1]))) for p in (2, 3)])
        alone = np.asarray(jds.get(3))
        bits = fn.random_map(raw_bits, fn.range(6), seed=seed, rng="jax")
        narrow = np.asarray(fn.to_jax(bits).get_many(jnp.arange(12)))
        with jax.enable_x64(True):
            wide = np.asarray(fn.to_jax(bits).get_many(jnp.arange(12)))
        other = fn.random_map(noisy, fn.shuffle(fn.range(6), seed=1), seed=seed - 2**40, rng="jax")
        other_draws = np.asarray(fn.to_jax(other).get_many(jnp.arange(12)))
    np.testing.assert_array_equal(together, host)
    np.testing.assert_array_equal(pairs, host[[2, 3, 3, 4]])
    np.testing.assert_array_equal(alone, host[3])
    np.testing.assert_array_equal(wide, narrow)  # the same bits in both integer modes
    assert not np.array_equal(other_draws, host)  # the seed's high word counts


def test_state_functions_take_the_to_jax_value_and_its_states_in_any_epoch() -> None:
    ds = fn.batch(2, fn.shuffle(fn.range(8), seed=4))
    jds = fn.to_jax(ds)
    state = jds.device_state(DatasetPosition(4 * 21 + 1))  # epoch 21 of 4 batches
    assert (int(state.epoch), int(state.offset)) == (21, 1)
    _, state = jax.jit(jds.step)(state)
    saved = fn.state_to_dict(jds, state)  # the host twin's dict: the dataset repeated
    assert saved == fn.state_to_dict(fn.repeat(None, ds), DatasetPosition(86))
    assert jds.host_state(fn.state_from_dict(jds, saved)) == DatasetPosition(86)
    np.testing.assert_array_equal(next(fn.iterate(jds, state)), ds.get(86))
    # Orbax restores a NamedTuple without a target as a dict of its fields.
    restored = {"epoch": np.int32(21), "offset": np.int32(2)}
    assert jds.host_state(restored) == DatasetPosition(86)
    # A device state given to the unrepeated dataset says what to pass instead.
    with pytest.raises(TypeError, match=r"Pass the to_jax value.*fn\.state_to_dict\(jds, state\)"):
        fn.state_to_dict(ds, state)
    with pytest.raises(ValueError, match=r"in its epoch 21.*fn\.repeat\(None, ds\)"):
        fn.state_to_dict(ds, jds.host_state(state))


def test_a_map_reads_extra_arrays_as_leaves_not_constants() -> None:
    tokens = np.arange(1000, 1000 + 64 * 9, dtype=np.int32)  # a flat token stream

    def window(i: Any, tokens: Any) -> Any:
        return jax.lax.dynamic_slice(tokens, (i * 64,), (65,))  # inputs and targets

    ds = fn.shuffle(fn.map(window, fn.range(8), arrays=tokens), seed=1)
    jds = fn.to_jax(ds)
    assert any(leaf.shape == tokens.shape for leaf in jds.arrays)
    step = jax.jit(fn.JaxDataset.step)

    def constants(jds: Any) -> list[str]:
        text = step.lower(jds, jds.init()).as_text()
        return [line for line in text.splitlines() if "constant" in line and "576xi32" in line]

    assert constants(jds) == []  # the tokens are an argument, not a constant
    closure = fn.map(lambda i: window(i, tokens), fn.range(8))
    assert len(constants(fn.to_jax(closure))) == 1  # as a closure over them would fold them
    element, _ = step(jds, jds.init())
    np.testing.assert_array_equal(element, ds.get(0))
    np.testing.assert_array_equal(jds.get_many(jnp.arange(16)), np.stack(ds.get_many(range(16))))
    assert ds.get(0)[0] % 64 == 1000 % 64  # each window starts on a multiple of 64
