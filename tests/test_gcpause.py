"""sim.gcpause: the collector paused within a phase; a sweep worker's survivors frozen between points."""

from __future__ import annotations

import gc
import weakref

import pytest

from sim.gcpause import SurvivorFreezer, frozen_survivors, paused_gc


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


@pytest.fixture(autouse=True)
def _unfrozen():
    gc.collect()
    yield
    gc.unfreeze()


def test_paused_gc_restores_the_collector() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_point_done_freezes_what_is_alive() -> None:
    kept = [_Node() for _ in range(100)]
    freezer = SurvivorFreezer(collect_every=4)
    freezer.point_done()
    assert gc.get_freeze_count() >= len(kept)
    freezer.close()
    assert gc.get_freeze_count() == 0


def test_a_frozen_cycle_is_freed_at_the_next_full_collection() -> None:
    freezer = SurvivorFreezer(collect_every=3)
    node = _Node()
    alive = weakref.ref(node)
    freezer.point_done()  # point 1: the cycle is frozen
    del node
    gc.collect()
    assert alive() is not None  # frozen: no collection reaches it
    freezer.point_done()  # point 2
    assert alive() is not None
    freezer.point_done()  # point 3: unfrozen, then a full collection
    assert alive() is None


def test_frozen_survivors_unfreezes_on_exit() -> None:
    with frozen_survivors(collect_every=2) as point_done:
        point_done()
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_collect_every_must_be_positive() -> None:
    with pytest.raises(ValueError, match="collect_every must be >= 1, got 0"):
        SurvivorFreezer(collect_every=0)
