"""The swap reading's scores on a fixed small problem, pinned to the values main gave before the scoring
optimisations of issue 12 (recorded at a951020 with ``python tests/_swap_pin_problem.py``).

Faster code must give the same numbers up to float noise: relative 1e-5, or 2e-8 probability points for
the smallest scores (the target's logit is float32: its rounding, ~1e-7 relative, moves P(y|x) by about
that much; a secant line search amplifies it), exact for counts and group indices.
Covers binary, 3-class and continuous c, a Newton path with a line search, the first-order evaluation, c's
own column as a target input (the direct term) and a probability output form, with admissible and
held-fixed features and several chunks (64 rows each).
"""

import numpy as np
import pytest

from _swap_pin_problem import CASES, summary

PINNED = {
    "binary": {
        "scores_head": [
            7.643963411285704e-05,
            0.00019673997213109917,
            0.004028264515447688,
            0.0022872291701285796,
            2.355315546354042e-05,
            0.004006945067684176
        ],
        "scores_sum": 0.885734259024429,
        "scores_sq": 0.00544337808020251,
        "scores_max": 0.024431011450694262,
        "undefined": 0,
        "probability_sum": 167.2815111722425,
        "cf_probability_sum": 167.23745460112843,
        "cf_target_sum": 145,
        "direct_sum": None,
        "evidence_abs_sum": 1.5772502422332764
    },
    "three": {
        "scores_head": [
            0.03064020197747941,
            0.01244365550261417,
            0.037609117099377865,
            0.011980270057597386,
            0.010003208898732852,
            0.010838035395962842
        ],
        "scores_sum": 3.1933267234090144,
        "scores_sq": 0.07726198614598766,
        "scores_max": 0.0779163501870983,
        "undefined": 0,
        "probability_sum": 167.2815111722425,
        "cf_probability_sum": 169.25526295474148,
        "cf_target_sum": 278,
        "direct_sum": None,
        "evidence_abs_sum": 3.2067928314208984
    },
    "continuous": {
        "scores_head": [
            0.002066234933094324,
            0.005475341125016242,
            0.0064803093051408744,
            0.0015620993920907322,
            0.0003912292084790048,
            0.0018260223623606242
        ],
        "scores_sum": 0.5049247379160474,
        "scores_sq": 0.001541424626458906,
        "scores_max": 0.012962231645447853,
        "undefined": 0,
        "probability_sum": 167.2815111722425,
        "cf_probability_sum": 167.28703840186134,
        "cf_target_sum": -8,
        "direct_sum": None,
        "evidence_abs_sum": 0.8192626237869263
    },
    "binary-path": {
        "scores_head": [
            7.643963411285704e-05,
            0.00019673997213109917,
            0.004009120735737781,
            0.0021260790143406982,
            2.355315546354042e-05,
            0.004327929282724519
        ],
        "scores_sum": 0.07764254253571823,
        "scores_sq": 1.010073539470608,
        "scores_max": 0.04129725328509681,
        "undefined": 1,
        "probability_sum": 167.2815111722425,
        "cf_probability_sum": 165.5964418662428,
        "cf_target_sum": 145,
        "direct_sum": None,
        "evidence_abs_sum": 2.0745506286621094
    },
    "binary-first": {
        "scores_head": [
            7.6467264799829e-05,
            0.00019674838709139592,
            0.004107704250577882,
            0.002919874338113685,
            2.3686835070073315e-05,
            0.004006790474173774
        ],
        "scores_sum": 0.8947629727322205,
        "scores_sq": 0.006294370141250799,
        "scores_max": 0.03376221296998183,
        "undefined": 0,
        "probability_sum": 167.2815111722425,
        "cf_probability_sum": 167.23745460112843,
        "cf_target_sum": 145,
        "direct_sum": None,
        "evidence_abs_sum": 1.5772502422332764
    },
    "binary-direct": {
        "scores_head": [
            0.029212233827009215,
            3.083413831117543e-05,
            0.0030765469505978915,
            0.000497261666062121,
            0.007758310750817121,
            0.0011821691008109259
        ],
        "scores_sum": 2.9335496174025057,
        "scores_sq": 0.0880695859291134,
        "scores_max": 0.07674385749855439,
        "undefined": 0,
        "probability_sum": 167.50537807775532,
        "cf_probability_sum": 165.78565655799986,
        "cf_target_sum": 145,
        "direct_sum": 0.5892545240837664,
        "evidence_abs_sum": 3.3729138374328613
    },
    "binary-prob": {
        "scores_head": [
            7.647275924682617e-05,
            0.00019669532775878906,
            0.004028260707855225,
            0.0022872090339660645,
            2.3484230041503906e-05,
            0.00400698184967041
        ],
        "scores_sum": 0.8857336044311523,
        "scores_sq": 0.005443375933438688,
        "scores_max": 0.024431049823760986,
        "undefined": 0,
        "probability_sum": 167.28151160478592,
        "cf_probability_sum": 167.23745447397232,
        "cf_target_sum": 145,
        "direct_sum": None,
        "evidence_abs_sum": 1.5772502422332764
    }
}


@pytest.mark.parametrize("case", CASES)
def test_swap_scores_match_the_values_recorded_before_the_optimisation(case):
    got, want = summary(case), PINNED[case]
    for key, value in want.items():
        if value is None or isinstance(value, int):
            assert got[key] == value, key
        else:
            np.testing.assert_allclose(got[key], value, rtol=1e-5, atol=2e-8, err_msg=key)


def test_nan_beyond_the_probe_rows_is_refused_with_the_whole_count():
    """Finiteness is checked chunk by chunk (no (n, d) temporary); the error still counts every bad row."""
    from _swap_pin_problem import _problem

    from faux_checks.errors import InputError

    tester, X, c = _problem("binary")
    X[280, 2] = np.nan                          # in the fifth 64-row chunk, after the 256 probe rows
    X[290, 0] = np.inf
    X[299, 1] = -np.inf
    with pytest.raises(InputError, match="X has 3 rows with NaN/inf of 300"):
        tester.evaluate(X, c)
    big = np.full_like(X, 3e37)                 # finite values whose float32 sum overflows: not refused
    assert np.isfinite(tester.evaluate(big, c, evidence=False).probability).all()
