"""Two mechanisms of :mod:`faux_checks.groundtruth.mechanisms` against their definitions: the weak admissible
mediator (closed-form group contrast and ROC-AUC, the counterfactual holding it, an admissible-only target exactly
fair) and the many-valued definitional link (its ``[linked_columns]`` declaration gives, for every row, the true
counterfactual name among the candidates, and only names of the row's own level of R).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import ndtr
from sklearn.metrics import roc_auc_score

from faux_checks.baselines.linked_columns import linked_candidates
from faux_checks.groundtruth.mechanisms import (DEFAULT_STRENGTH, WEAK_MEDIATOR_STRENGTH, make_mechanism_data,
                                                mechanism_fairness_scores)


def _base(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"L": rng.normal(size=n), "x": rng.normal(size=n),
                          "R": rng.choice(["single", "married", "divorced"], n)})
    return frame, (frame["x"] + rng.normal(size=n) > 0).astype(int).to_numpy()


def test_the_weak_mediator_reads_c_at_its_closed_form_and_the_counterfactual_holds_it():
    base, y = _base(60_000, 0)
    data = make_mechanism_data(base, y, mechanism="weak_mediator", column="L", seed=0)
    own = data.caused()
    s_m, s = WEAK_MEDIATOR_STRENGTH, DEFAULT_STRENGTH["weak_mediator"]
    m = own["mediator"].to_numpy()
    # mediator | c ~ N(s_m·(2c − 1), 1 + 1/16): contrast 2·s_m, ROC-AUC Φ(2·s_m / √(2·(1 + 1/16)))
    assert abs(m[data.c == 1].mean() - m[data.c == 0].mean() - 2 * s_m) < 0.03
    assert abs(roc_auc_score(data.c, m) - ndtr(2 * s_m / np.sqrt(2 * 1.0625))) < 0.01
    assert "L" not in data.base.columns and "mediator" in data.admissible and "proxy" not in data.admissible
    other = data.counterfactual_frame(1 - data.c)
    np.testing.assert_array_equal(other["mediator"], own["mediator"])     # admissible: held at its own value
    np.testing.assert_allclose(other["proxy"] - own["proxy"], -2 * s * (2 * data.c - 1))


def test_a_target_of_the_admissible_columns_only_is_exactly_fair():
    base, y = _base(2000, 1)
    data = make_mechanism_data(base, y, mechanism="weak_mediator", column="L", bias=1.0, seed=1)

    def admissible_only(frame):
        return 1 / (1 + np.exp(-(frame["mediator"].to_numpy() + frame["x"].to_numpy())))

    def every_column(frame):
        return 1 / (1 + np.exp(-(frame["mediator"].to_numpy() + 2 * frame["proxy"].to_numpy())))
    assert mechanism_fairness_scores(admissible_only, data).max() == 0.0
    assert (mechanism_fairness_scores(every_column, data) > 0.1).mean() > 0.5


def test_the_declared_links_give_each_row_its_true_counterfactual_name_within_its_level_of_r():
    base, y = _base(600, 2)
    data = make_mechanism_data(base, y, mechanism="names", column="R", seed=2)
    frame = data.frame().assign(c=data.protected())
    groups = np.asarray(["g0", "g1"], dtype=object)
    frames, weights = linked_candidates(frame, protected="c", groups=groups[data.c], to_groups=groups[1 - data.c],
                                        links=data.links)
    names = np.stack([f["first_name"].to_numpy() for f in frames], axis=1)          # (n, J)
    true_name = data.caused(1 - data.c)["first_name"].to_numpy()
    table = data.params["names"]                                                     # (m, levels of R, 3)
    for i in range(len(frame)):
        candidates = set(names[i][weights[i] > 0])
        assert true_name[i] in candidates
        assert candidates == set(table[1 - data.c[i], data.noise["cell_of_row"][i]])
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
