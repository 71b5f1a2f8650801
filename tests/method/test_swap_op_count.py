"""The swap reading's device path issues a bounded number of torch ops per chunk, whatever the number of free
features: counted on the CPU with the torch path forced (``faux_checks.method.torch_path._FORCE_TORCH``), every
torch op dispatched inside ``swap_chunk`` (a ``TorchDispatchMode`` counter), for binary, 3-class and continuous c
with every feature free in the default (matched) reading. The count is taken on a second evaluation: the first
copies the reference's tables to the device (once per reference and device, not per chunk).

The matched move reads each (group pair, feature) from one stacked table in one search
(:class:`faux_checks.method.quantiles.BucketTables`) and a continuous c's bins from one
:class:`faux_checks.method.shifts.ContinuousStack`, so the count does not grow with d (a Python loop over
features or bins would add ops per feature: the counts at d = 8 and d = 24 are compared, less the tables' search
steps, whose number follows how close the knots lie).
"""

import contextlib

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import faux_checks.method.chunk as chunk_mod
import faux_checks.method.faux as faux_mod
import faux_checks.method.torch_path as torch_path_mod
from faux_checks.method.auxiliary import AuxiliaryModel, AuxNet
from faux_checks.method.faux import FAuxTester
from faux_checks.method.output import TargetOutput

#: Torch ops per chunk the device path may issue, every feature free, for every kind of c (measured: binary 116,
#: 3-class 145 at d = 8 and 149 at d = 24 (one search step more), continuous 200; the first chunk, which builds the
#: tables, about 10 more).
MAX_OPS_PER_CHUNK = 200
ROWS, CHUNK = 1500, 500


class _OpCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


def _tester(kind: str, d: int):
    """Rows where c moves every feature's mean (so no feature is held), a random target and aux network."""
    torch.manual_seed(3)
    rng = np.random.default_rng(3)
    c = {"binary": rng.integers(0, 2, ROWS), "multiclass": rng.integers(0, 3, ROWS),
         "continuous": rng.standard_normal(ROWS)}[kind]
    shift = (c - c.mean())[:, None] * rng.choice([-1.0, 1.0], d)
    X = (rng.standard_normal((ROWS, d)) + shift).astype(np.float32)
    m = 3 if kind == "multiclass" else 1
    target = nn.Sequential(nn.Linear(d, 16), nn.Tanh(), nn.Linear(16, 1)).eval()
    aux = AuxiliaryModel.from_module(AuxNet(d, m, (16, 16), torch.zeros(d), torch.ones(d)), kind=kind, n_features=d)
    tester = FAuxTester(target, aux, variant="swap", output=TargetOutput(form="logit", target_class=1),
                        chunk_size=CHUNK)
    tester.fit_reference(X, c)
    assert not tester.reference.admissible.any()                             # every feature free
    assert tester.reference.matching is not None and len(tester.reference.matching.positions) == d
    return tester, X, c


#: Torch ops per search step of the matched move's tables (BucketTables: the next knot gathered, compared, added).
OPS_PER_STEP = 4


def _search_ops(tester, kind: str) -> int:
    """The tables' search-step ops per chunk: their number follows how close the knots lie (the data), not d."""
    if kind == "continuous":
        return 0
    tables = tester.reference.matching.pair_tables(torch.device("cpu"))[1]
    return OPS_PER_STEP * tables.search_steps(torch.float32)                 # one lookup for every other group


def _ops_per_chunk(kind: str, d: int, monkeypatch) -> tuple[list[int], list[int]]:
    """Torch ops per chunk, and the same less the tables' search steps (:func:`_search_ops`)."""
    tester, X, c = _tester(kind, d)
    counts: list[int] = []
    real = chunk_mod.swap_chunk

    def counted(*args, **kw):
        with _OpCounter() as counter:
            out = real(*args, **kw)
        counts.append(counter.ops)
        return out

    with contextlib.ExitStack() as stack:
        stack.callback(setattr, torch_path_mod, "_FORCE_TORCH", torch_path_mod._FORCE_TORCH)
        torch_path_mod._FORCE_TORCH = True
        monkeypatch.setattr(faux_mod, "swap_chunk", real)
        tester.evaluate(X[:CHUNK], c[:CHUNK], evidence=False)             # the tables go to the device once
        monkeypatch.setattr(faux_mod, "swap_chunk", counted)
        result = tester.evaluate(X, c, evidence=False)
    assert np.isfinite(result.scores).all() and np.nanmax(result.scores) > 1e-3   # the move is read, not skipped
    assert len(counts) == ROWS // CHUNK
    return counts, [n - _search_ops(tester, kind) for n in counts]


@pytest.mark.parametrize("kind", ["binary", "multiclass", "continuous"])
def test_the_device_path_issues_a_bounded_number_of_torch_ops_per_chunk_whatever_d(kind, monkeypatch):
    small, small_net = _ops_per_chunk(kind, 8, monkeypatch)
    large, large_net = _ops_per_chunk(kind, 24, monkeypatch)
    assert max(small + large) <= MAX_OPS_PER_CHUNK, (small, large)
    assert large_net == small_net                                            # no op per feature
