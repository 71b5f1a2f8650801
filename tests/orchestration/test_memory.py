"""Garbage collection between a gate's versions (faux_checks_flows.memory): what was alive before a version is
frozen, what a version leaves as cyclic garbage is collected after it, and everything is handed back at the end."""

from __future__ import annotations

import gc
import weakref


class _Node:
    def __init__(self):
        self.me = self     # a reference cycle: only the cyclic collector frees it


def test_versions_frozen_freezes_what_was_alive_and_collects_each_versions_cycles():
    from faux_checks_flows.memory import free_version_memory, versions_frozen

    assert gc.get_freeze_count() == 0
    before = _Node()
    with versions_frozen():
        assert gc.is_tracked(before) and gc.get_freeze_count() >= 1
        made = _Node()
        gone = weakref.ref(made)
        del made
        free_version_memory()
        assert gone() is None                      # the version's cycle was collected
        kept = _Node()
        free_version_memory()                      # its survivors (kept) are frozen for the next version:
        died_frozen = weakref.ref(kept)
        del kept
        gc.collect()
        assert died_frozen() is not None           # a cycle frozen alive is not collected inside the block
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert died_frozen() is None                   # handed back: the first collection after the block frees it
    del before
