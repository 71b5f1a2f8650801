"""The auxiliary model trained once per process: a reused model is the one a new training gives."""

from __future__ import annotations

import numpy as np
import torch
from _support import FAIR, UNFAIR, linear, make_data

from faux_checks.gate.aux_cache import aux_cache_stats, clear_aux_cache
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.gate.policy import load_policy


def _policy(tmp_path, extra=""):
    p = tmp_path / "p.toml"
    p.write_text('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n[faux]\ndelta = 0.05\n'
                 'max_flagged_fraction = 0.1\n[aux]\nepochs = 8\n' + extra + '[decision]\nmin_group_rows = 20\n'
                 'aux_seeds = 2\n')
    return load_policy(p)


def test_a_second_version_on_the_same_rows_reuses_the_aux_model_and_scores_as_if_retrained(tmp_path):
    data = make_data(1200, seed=1)
    policy = _policy(tmp_path)
    first = check_one_attribute(linear(UNFAIR), data, policy=policy)
    stats = aux_cache_stats()                                                       # the model and one extra seed
    assert {k: stats[k] for k in ("hits", "trainings", "restored", "entries")} == {"hits": 0, "trainings": 2,
                                                                                    "restored": 0, "entries": 2}
    second = check_one_attribute(linear(FAIR), data, policy=policy)
    assert aux_cache_stats()["hits"] == 2 and aux_cache_stats()["trainings"] == 2
    assert second.to_dict()["provenance"]["aux_reused"] and not first.to_dict()["provenance"]["aux_reused"]
    clear_aux_cache()
    retrained = check_one_attribute(linear(FAIR), data, policy=policy)                       # what a new training gives
    assert aux_cache_stats()["trainings"] == 2 and not retrained.to_dict()["provenance"]["aux_reused"]
    np.testing.assert_array_equal(second.scores, retrained.scores)
    assert second.interval == retrained.interval and second.aux_quality == retrained.aux_quality
    for a, b in zip(second.aux_model.net_.state_dict().values(), retrained.aux_model.net_.state_dict().values(), strict=False):
        assert torch.equal(a, b)


def test_other_rows_other_settings_or_a_changed_copy_never_reuse(tmp_path):
    data = make_data(1200, seed=1)
    check_one_attribute(linear(UNFAIR), data, policy=_policy(tmp_path))
    check_one_attribute(linear(UNFAIR), data, policy=_policy(tmp_path, "hidden = [16]\n"))     # other [aux] settings
    other = data.copy()
    other.loc[0, "f2"] += 0.5                                                         # one value of one row
    check_one_attribute(linear(UNFAIR), other, policy=_policy(tmp_path))
    assert aux_cache_stats()["hits"] == 0 and aux_cache_stats()["trainings"] == 6
    result = check_one_attribute(linear(UNFAIR), data, policy=_policy(tmp_path))             # the first inputs again: reused
    assert aux_cache_stats()["hits"] == 2
    with torch.no_grad():                                                            # a caller editing its copy...
        next(result.aux_model.net_.parameters()).add_(1.0)
    again = check_one_attribute(linear(UNFAIR), data, policy=_policy(tmp_path))                # ...never reaches the store
    assert not torch.equal(next(again.aux_model.net_.parameters()), next(result.aux_model.net_.parameters()))
