"""ElasticIterator over a MapDataset against Grain 0.2.18's, on random pipelines.

For Grain's case (an unbatched MapDataset without filter) every host's batches
and the state (`{"global_next_index": n}`) equal Grain's, and a state saved
under one host count, by either library, continues under another exactly as
Grain's does. A pipeline Grain refuses (a filter) grainfn refuses too.
"""

from __future__ import annotations

from typing import Any

import grain
import pytest
from hypothesis import event, given, note
from hypothesis import strategies as st

import grainfn
from grainfn.testing import assert_elements_equal

from support.grain_shuffle import grain_shuffle_is_not_a_permutation
from support.pipelines import build_dataset, build_grain, dataset_specs

pytestmark = pytest.mark.grain

STEPS = 4


def elastic(module: Any, spec: tuple[Any, ...], size: int, host: int, hosts: int) -> Any:
    ds = build_grain(spec, module)
    options = module.sharding.ShardOptions(shard_index=host, shard_count=hosts)
    return module.experimental.ElasticIterator(ds, size, options)


def steps(iterator: Any, count: int) -> tuple[list[Any], type | None]:
    """Up to `count` batches, and the type of the error that ended them early (if one did)."""
    out = []
    for _ in range(count):
        try:
            out.append(next(iterator))
        except StopIteration:
            break
        except (ValueError, TypeError, OverflowError) as error:
            # Ragged elements cannot be stacked; Grain's float length arithmetic on
            # an infinite dataset overflows (see test_differential_grain).
            return out, type(error)
    return out, None


def assert_same(
    ours: tuple[list[Any], type | None], theirs: tuple[list[Any], type | None], where: str
) -> None:
    if theirs[1] is OverflowError:
        return  # Grain cannot compute the positions; grainfn's exact lengths can
    assert len(ours[0]) == len(theirs[0]), where
    assert ours[1] is theirs[1], f"{where}: error {ours[1]} != {theirs[1]}"
    for step, (a, b) in enumerate(zip(ours[0], theirs[0])):
        assert_elements_equal(a, b, f"{where}, step {step}")


sizes_and_hosts = st.sampled_from([1, 2, 4]).flatmap(
    lambda hosts: st.tuples(st.integers(1, 3).map(lambda k: k * hosts * 2), st.just(hosts))
)


@given(dataset_specs(), sizes_and_hosts, st.sampled_from([1, 2]), st.integers(0, STEPS))
def test_elastic_map_datasets_match_grain_on_any_host_count(
    spec: tuple[Any, ...], layout: tuple[int, int], resumed_hosts: int, taken: int
) -> None:
    note(f"spec = {spec!r}, layout = {layout}, then {resumed_hosts} hosts after {taken}")
    size, hosts = layout
    try:
        theirs = [elastic(grain, spec, size, h, hosts) for h in range(hosts)]
    except (ValueError, TypeError):
        with pytest.raises((ValueError, TypeError)):
            [elastic(grainfn, spec, size, h, hosts) for h in range(hosts)]
        return
    except OverflowError:
        return  # Grain's float length arithmetic cannot build it (see test_differential_grain)
    if grain_shuffle_is_not_a_permutation(build_dataset(spec)):
        return  # Grain's shuffle repeats elements for this length (a documented difference)
    event("compared")
    ours = [elastic(grainfn, spec, size, h, hosts) for h in range(hosts)]
    for h in range(hosts):
        assert_same(steps(ours[h], taken), steps(theirs[h], taken), f"host {h}")
        assert ours[h].get_state() == theirs[h].get_state()
    saved = theirs[0].get_state()
    for h in range(resumed_hosts):
        mine = elastic(grainfn, spec, size * resumed_hosts // hosts, h, resumed_hosts)
        reference = elastic(grain, spec, size * resumed_hosts // hosts, h, resumed_hosts)
        mine.set_state(saved)
        reference.set_state(saved)
        assert_same(steps(mine, 2), steps(reference, 2), f"host {h} of {resumed_hosts}, resumed")


def test_a_filter_is_refused_like_grain() -> None:
    for module in (grain, grainfn):
        ds = module.MapDataset.range(10).filter(lambda x: x % 2)
        with pytest.raises(ValueError, match="filter"):
            it = module.experimental.ElasticIterator(ds, 2, module.sharding.ShardOptions(0, 1))
            next(iter(it))


def test_grains_elastic_state_in_an_orbax_checkpoint_restores_into_grainfn(
    tmp_path: Any,
) -> None:
    # Grain 0.2.18's own CheckpointSave fails on its ElasticIterator (its state is a dict,
    # not JSON bytes), so a Grain run keeps that dict with Orbax's JSON handler.
    import orbax.checkpoint as ocp

    def elastic_of(module: Any) -> Any:
        ds = module.MapDataset.range(64).seed(3).shuffle().map(lambda x: x * 2)
        return module.experimental.ElasticIterator(ds, 4, module.sharding.ShardOptions(0, 1))

    theirs = elastic_of(grain)
    for _ in range(5):
        next(theirs)
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(5, args=ocp.args.JsonSave(theirs.get_state()))
        manager.wait_until_finished()
    expected = [b.tolist() for b in theirs]
    ours = elastic_of(grainfn)
    with ocp.CheckpointManager(tmp_path) as manager:
        ours.set_state(manager.restore(5, args=ocp.args.JsonRestore()))
    assert [b.tolist() for b in ours] == expected and len(expected) == 11
