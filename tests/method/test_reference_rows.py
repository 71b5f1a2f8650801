"""The swap reference's capped, seeded sample of reference and hold-out rows (faux_checks.method.reference_rows)."""

import json

import numpy as np
import torch

from faux_checks.method import reference_rows
from faux_checks.method.auxiliary import AuxiliaryModel, AuxNet
from faux_checks.method.faux import FAuxTester
from faux_checks.method.output import TargetOutput
from faux_checks.method.reference_rows import capped_rows


def test_rows_within_the_cap_are_all_kept_in_order():
    assert capped_rows(np.zeros(20), grouped=True, max_rows=20) is None
    assert capped_rows(np.linspace(0, 1, 5), grouped=False, max_rows=5) is None


def test_a_continuous_c_gets_a_plain_seeded_sample_of_the_cap():
    c = np.arange(1000.0)
    rows = capped_rows(c, grouped=False, max_rows=100, seed=4)
    assert len(rows) == 100 and len(np.unique(rows)) == 100 and np.all(np.diff(rows) > 0)
    np.testing.assert_array_equal(rows, np.sort(np.random.default_rng(4).choice(1000, 100, replace=False)))
    assert not np.array_equal(rows, capped_rows(c, grouped=False, max_rows=100, seed=5))


def test_groups_keep_their_share_and_a_small_group_keeps_its_rows(monkeypatch):
    monkeypatch.setattr(reference_rows, "MIN_GROUP_ROWS", 30)
    c = np.r_[np.zeros(900), np.ones(80), np.full(20, 2)].astype(np.int64)
    rows = capped_rows(c, grouped=True, max_rows=100)
    counts = np.bincount(c[rows], minlength=3)
    # shares 90, 8 and 2 rows; the floor of 30 lifts group 1 to 30 and keeps group 2's 20 rows
    assert counts.tolist() == [90, 30, 20]
    assert set(np.flatnonzero(c == 2)) <= set(rows.tolist())


def _tester(d: int):
    torch.manual_seed(1)
    net = AuxNet(d, 1, (8, 8), torch.zeros(d), torch.ones(d))
    aux = AuxiliaryModel.from_module(net, kind="binary", n_features=d)
    target = torch.nn.Sequential(torch.nn.Linear(d, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1)).eval()
    return FAuxTester(target, aux, variant="swap", output=TargetOutput("logit"))


def test_beyond_the_cap_the_reference_is_the_one_fitted_on_the_recorded_sample(monkeypatch):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1200, 4)).astype(np.float32)
    c = (X[:, 0] + rng.normal(size=1200) > 0).astype(np.int64)
    ref, hold = slice(0, 900), slice(900, 1200)
    monkeypatch.setattr(reference_rows, "REFERENCE_MAX_ROWS", 400)
    monkeypatch.setattr(reference_rows, "MIN_GROUP_ROWS", 50)
    capped = _tester(4).fit_reference(X[ref], c[ref], holdout=(X[hold], c[hold]))
    assert capped.reference_sample_ == {"rows": 400, "of": 900, "holdout_rows": 300, "holdout_of": 300,
                                        "max_rows": 400, "seed": 0}
    kept = capped_rows(c[ref], grouped=True, max_rows=400, seed=0)
    monkeypatch.setattr(reference_rows, "REFERENCE_MAX_ROWS", 10_000)
    direct = _tester(4).fit_reference(X[ref][kept], c[ref][kept], holdout=(X[hold], c[hold]))
    assert direct.reference_sample_["rows"] == direct.reference_sample_["of"] == 400
    assert json.dumps(capped.reference.to_dict()) == json.dumps(direct.reference.to_dict())
    np.testing.assert_array_equal(capped.held_fixed_, direct.held_fixed_)
