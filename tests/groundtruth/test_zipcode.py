"""The zip-code-like family: two couplings with the same marginals, and the exact counterfactual of each."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from faux_checks.errors import InputError
from faux_checks.groundtruth.zipcode import REDLINING, ZIP_LEVELS, make_zip_data, zip_fairness_scores, zip_unfair_logit


def _base(n: int) -> pd.DataFrame:
    return pd.DataFrame({"age": np.random.default_rng(0).integers(18, 80, n).astype(float)})


@pytest.mark.parametrize("coupling", ["inverse_cdf", "gumbel"])
def test_both_couplings_draw_the_level_model_s_marginals(coupling):
    data = make_zip_data(_base(40_000), coupling=coupling, seed=1)
    for g in (0, 1):
        rows = data.c == g
        observed = np.bincount(data.level()[rows], minlength=ZIP_LEVELS) / rows.sum()
        expected = data.level_probabilities(np.full(1, g))[0]
        assert np.abs(observed - expected).max() < 0.01                     # sd of a share ≈ 0.0014 at 20,000 rows


def test_the_inverse_cdf_counterfactual_keeps_each_rank_and_the_gumbel_one_moves_fewer_people():
    """Group 1 lives further along the line (likelihood ratio monotone in the place): under the inverse CDF every
    person's level in group 1 is at least their level in group 0; Gumbel-max noise keeps more people at their level."""
    inv = make_zip_data(_base(20_000), coupling="inverse_cdf", seed=2)
    gum = make_zip_data(_base(20_000), coupling="gumbel", seed=2)
    assert (inv.level(np.ones(20_000, int)) >= inv.level(np.zeros(20_000, int))).all()
    moved = [np.mean(d.level(np.ones(20_000, int)) != d.level(np.zeros(20_000, int))) for d in (inv, gum)]
    assert moved[1] < moved[0]


def test_the_truth_is_zero_for_a_blind_target_and_exact_for_the_redlining_one():
    data = make_zip_data(_base(500), coupling="inverse_cdf", seed=3)
    assert (zip_fairness_scores(lambda f: np.full(len(f), 0.3), data) == 0).all()
    sig = lambda z: 1 / (1 + np.exp(-z))                                        # noqa: E731
    truth = zip_fairness_scores(lambda f: sig(zip_unfair_logit(f)), data)
    places = 2.0 * np.stack([data.level(), data.level(1 - data.c)]) / (ZIP_LEVELS - 1) - 1.0
    np.testing.assert_allclose(truth, np.abs(sig(-REDLINING * places[0]) - sig(-REDLINING * places[1])))


def test_bad_inputs_are_refused():
    with pytest.raises(InputError, match="coupling must be one of"):
        make_zip_data(_base(10), coupling="optimal")
    with pytest.raises(InputError, match="column named 'zip'"):
        make_zip_data(_base(10).assign(zip=1), coupling="gumbel")
