"""The swap reference fitted once per process and inputs: gate/aux_cache.fitted_reference.

The reference depends on the auxiliary model, its rows and values and the reading's settings, not on the target:
a second target checked on the same audit data reuses it, and scores exactly as with a reference fitted anew.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch
from _support import FAIR, UNFAIR, linear, make_data

from faux_checks.gate.aux_cache import _reference_key, aux_cache_stats, clear_aux_cache
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.policy import load_policy

POLICY = ('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n'
          '{faux}[aux]\nepochs = 8\n[decision]\nmin_group_rows = 20\naux_seeds = 1\n')


def _policy(tmp_path, faux: str = ""):
    p = tmp_path / f"p{abs(hash(faux))}.toml"
    p.write_text(POLICY.format(faux=faux))
    return load_policy(p)


def test_a_second_target_reuses_the_reference_and_scores_as_with_a_new_fit(tmp_path):
    data, policy = make_data(800, seed=3), _policy(tmp_path)
    clear_aux_cache()
    check_one_attribute(linear(FAIR), data, policy=policy)
    reused = check_one_attribute(linear(UNFAIR), data, policy=policy)
    stats = aux_cache_stats()
    # the first check fitted one reference; the second reused it and fitted only its sensitivity reading's (a failed
    # check re-reads with one column declared admissible: gate/one_attribute.py, another reference)
    assert (stats["reference_fits"], stats["reference_hits"]) == (2, 1)
    assert (stats["trainings"], stats["hits"]) == (1, 1)
    clear_aux_cache()                                             # a fresh process: the reference fitted anew
    fresh = check_one_attribute(linear(UNFAIR), data, policy=policy)
    assert (aux_cache_stats()["reference_fits"], aux_cache_stats()["reference_hits"]) == (2, 0)
    np.testing.assert_array_equal(reused.scores, fresh.scores)
    assert reused.flagged_fraction == fresh.flagged_fraction > 0.1 and reused.decision == fresh.decision == "failed"
    assert reused.interval == fresh.interval


def test_other_rows_or_other_settings_fit_a_new_reference(tmp_path):
    clear_aux_cache()
    check_one_attribute(linear(FAIR), make_data(800, seed=3), policy=_policy(tmp_path))
    check_one_attribute(linear(FAIR), make_data(800, seed=4), policy=_policy(tmp_path))                # other audit rows
    check_one_attribute(linear(FAIR), make_data(800, seed=3), policy=_policy(tmp_path, "hold_independent = false\n"))
    stats = aux_cache_stats()
    assert stats["reference_hits"] == 0 and stats["reference_fits"] == 3
    assert stats["hits"] == 1                   # the third check's aux model is the first's: only the reading changed


def _stub(weight: float = 0.5, groups=()):
    net = torch.nn.Linear(2, 1)
    with torch.no_grad():
        net.weight.fill_(weight)
        net.bias.zero_()
    return SimpleNamespace(aux_model=SimpleNamespace(net_=net, kind="binary"),
                           swap=SimpleNamespace(categorical="coupled", categorical_groups=groups))


def test_the_reference_key_reads_weights_rows_values_groups_and_settings():
    X, c = np.arange(6.0).reshape(3, 2), np.array([0, 1, 0])
    settings = {"admissible": np.array([False, True]), "metric": "matched", "holdout": (X, c)}
    base = _reference_key(_stub(), X, c, settings)
    assert base == _reference_key(_stub(), X.copy(), c.copy(), {**settings, "admissible": np.array([False, True])})
    X2 = X.copy()
    X2[2, 1] += 1e-12
    changed = [_reference_key(_stub(0.5000001), X, c, settings), _reference_key(_stub(), X2, c, settings),
               _reference_key(_stub(), X, np.array([0, 1, 1]), settings),
               _reference_key(_stub(groups=(np.array([0, 1]),)), X, c, settings),
               _reference_key(_stub(), X, c, {**settings, "admissible": np.array([True, False])}),
               _reference_key(_stub(), X, c, {**settings, "metric": "covariance"}),
               _reference_key(_stub(), X, c, {**settings, "holdout": (X2, c)}),
               _reference_key(_stub(), X.astype(np.float32), c, settings)]
    assert base not in changed and len(set(changed)) == len(changed)
