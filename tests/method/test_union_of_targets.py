"""The flag of a person with several other groups: the chance that moving to **any** of them changes the prediction
by more than δ, read as min(1, Σ_t P_t(change_t > δ)) over the counterfactual targets t (:func:`union_outcomes`).

Closed forms on dyadic numbers (exact in float32 and float64): two rows, two other groups, two level
configurations each, the target's prediction the first feature itself; the numpy path and the torch path (forced
on the CPU) give the same outcomes, weights and scores; one target (a binary c) is returned as given.
"""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

import faux_checks.method.chunk as chunk_mod
import faux_checks.method.torch_path as torch_path_mod
from faux_checks.method.chunk import swap_chunk, union_outcomes
from faux_checks.method.output import TargetOutput
from faux_checks.method.result import LICResult

P0 = 0.5
#: Per row, per other group: (the prediction at each configuration, its probability).
READS = {1: [([0.75, 0.5], [0.25, 0.75]), ([0.875, 0.4375], [0.75, 0.25])],
         2: [([0.625, 0.53125], [0.375, 0.625]), ([0.25, 0.5], [0.5, 0.5])]}
#: δ -> per row: group 1's and group 2's flag chance and their capped sum.
CHANCES = {0.1: [(0.25, 0.375, 0.625), (0.75, 0.5, 1.0)],
           0.2: [(0.25, 0.0, 0.25), (0.75, 0.5, 1.0)],
           0.3: [(0.0, 0.0, 0.0), (0.75, 0.0, 0.75)],
           0.01: [(0.25, 1.0, 1.0), (1.0, 0.5, 1.0)]}
#: The expected largest change: each configuration's change, largest first, with the weight left under 1.
#: row 0: .25·.25 + .125·.375 + .03125·.375; row 1: .375·.75 + .25·.25
UNION_SCORES = [0.12109375, 0.34375]


class _First(nn.Module):
    def forward(self, x):
        return x[:, :1]


def _candidates(groups=(1, 2)):
    out = []
    for t in groups:
        preds = np.array([r[0] for r in READS[t]])                       # (b, C)
        configs = torch.zeros(2, 2, 2)
        configs[:, :, 0] = torch.as_tensor(preds, dtype=torch.float32)
        out.append((t, configs, np.array([r[1] for r in READS[t]]), np.zeros(2, dtype=bool)))
    return out


def _read(monkeypatch, groups=(1, 2), torch_path=False):
    monkeypatch.setattr(chunk_mod, "coupled_inputs", lambda *a, **k: _candidates(groups))
    monkeypatch.setattr(torch_path_mod, "_FORCE_TORCH", torch_path)
    x = torch.tensor([[P0, 0.0], [P0, 0.0]])
    part = swap_chunk(_First(), None, x, np.zeros(2, dtype=np.int64), reference=SimpleNamespace(levels=[0]),
                      output=TargetOutput("probability"))
    return LICResult(scores=part.scores, undefined=part.undefined, evidence=None, probability=part.probability,
                     direct=None, outcomes=part.outcomes, outcome_weights=part.outcome_weights), part


@pytest.mark.parametrize("torch_path", [False, True])
@pytest.mark.parametrize("delta", sorted(CHANCES))
def test_the_flag_is_the_capped_sum_of_the_groups_flag_chances(monkeypatch, delta, torch_path):
    lic, part = _read(monkeypatch, torch_path=torch_path)
    want = [row[2] for row in CHANCES[delta]]
    np.testing.assert_allclose(lic.flag_probability(delta), want, rtol=0, atol=1e-15)
    np.testing.assert_allclose(part.outcome_weights.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(part.scores, UNION_SCORES, rtol=0, atol=1e-15)
    # row 0: group 2 has the larger expected change (0.0664 > 0.0625); its flag chance alone is 0.375 at δ = 0.1
    assert part.counterfactual_target.tolist() == [2, 1]


@pytest.mark.parametrize("delta", sorted(CHANCES))
def test_each_group_alone_reads_its_own_chance(monkeypatch, delta):
    for g, column in ((1, 0), (2, 1)):
        lic, part = _read(monkeypatch, groups=(g,))
        np.testing.assert_allclose(lic.flag_probability(delta), [row[column] for row in CHANCES[delta]], atol=1e-15)
        np.testing.assert_array_equal(part.outcome_weights, np.array([r[1] for r in READS[g]]))   # as given


def test_the_numpy_and_torch_paths_agree(monkeypatch):
    want = _read(monkeypatch)[1]
    got = _read(monkeypatch, torch_path=True)[1]
    for key in ("scores", "outcomes", "outcome_weights", "counterfactual_probability", "counterfactual_target"):
        np.testing.assert_array_equal(getattr(got, key), getattr(want, key), err_msg=key)


def test_union_outcomes_sorts_a_nan_change_last_and_gives_it_what_is_left():
    v = [np.array([[np.nan, 0.2]]), np.array([[0.1, 0.0]])]
    w = [np.array([[0.5, 0.5]]), np.array([[0.25, 0.75]])]
    out, weight = union_outcomes(v, w)
    np.testing.assert_array_equal(out[0, :3], [0.2, 0.1, 0.0])
    assert np.isnan(out[0, 3])
    np.testing.assert_array_equal(weight, [[0.5, 0.25, 0.25, 0.0]])
    # and the torch twin, the same numbers
    tv, tw = chunk_mod._union_outcomes_t([torch.as_tensor(a) for a in v], [torch.as_tensor(a) for a in w])
    np.testing.assert_array_equal(tw.numpy(), weight)
    np.testing.assert_array_equal(tv.numpy(), out)
