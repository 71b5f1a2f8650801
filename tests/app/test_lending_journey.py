"""A lending team's gate, end to end: a file of ordinary size is decided with the shipped defaults.

The data: :mod:`faux_checks.groundtruth.lending` (2,400 applications, 14% from the protected group, a yes/no
*adverse* label ``deny``, ``employment_years`` missing for about 1%, two tract-level proxies of the protected
attribute). Two versions logged with MLflow's own API (``mlflow.sklearn.log_model`` with skops serialization and
the HistGradientBoosting tree type trusted, as MLflow asks): v1 a HistGradientBoosting Pipeline blind to the proxies
on unbiased labels (true share of applicants moving by more than 10 points: 0), v2 the same learner on every column
with labels made harsher for the protected group (true share about 20%). The policy is the shipped default plus
``protected``, ``label``, ``positive_label`` and ``favourable_label`` (and the two numbers every policy states); the
gate trusts the one scikit-learn type skops does not trust by default and the team reviewed (``--trust-type``: the
``skops_trusted_types`` recorded in MLflow are the uploader's word, not the gate's).

Expected: v1 passes, v2 fails (exit 1), both with the missing values passed to the NaN-native model as they are,
and the report reads the outcome in the right direction (the majority, denied less often, is the most favoured).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skops")
pytestmark = pytest.mark.slow

TREE_PREDICTOR = "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor"
POLICY = """protected = "race"
label = "deny"
positive_label = "yes"
favourable_label = "no"

[faux]
delta = 0.1
max_flagged_fraction = 0.05
"""


def _pipeline(train, columns, seed=0):
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.pipeline import Pipeline

    return Pipeline([("prep", ColumnTransformer([("num", "passthrough", columns)])),
                     ("clf", HistGradientBoostingClassifier(max_iter=100, min_samples_leaf=40, learning_rate=0.08,
                                                            random_state=seed))]
                    ).fit(train.frame[columns], train.frame["deny"] == "yes")


@pytest.fixture(scope="module")
def lending(tmp_path_factory):
    """The audit file, the policy and the two logged versions, with each version's true share."""
    import mlflow
    import skops.io as sio

    from faux_checks.groundtruth.lending import (LENDING_FEATURES, LENDING_PROXIES, lending_fairness_scores,
                                                 make_lending_data)

    root = tmp_path_factory.mktemp("lending")
    legit, every = list(LENDING_FEATURES), list(LENDING_FEATURES + LENDING_PROXIES)
    fair = _pipeline(make_lending_data(6000, label_bias=0.0, strength=0.35, seed=100), legit)
    unfair = _pipeline(make_lending_data(6000, label_bias=0.3, strength=0.35, seed=100), every)
    audit = make_lending_data(2400, label_bias=0.3, strength=0.35, seed=0)
    assert audit.frame["employment_years"].isna().sum() > 10          # the file has missing values
    audit.frame.to_csv(root / "applications.csv", index=False)
    (root / "policy.toml").write_text(POLICY)
    truth = {"fair": lending_fairness_scores(audit, lambda f: fair.predict_proba(f[legit])[:, 1]),
             "unfair": lending_fairness_scores(audit, lambda f: unfair.predict_proba(f[every])[:, 1])}
    uri = f"sqlite:///{root}/mlflow.db"
    mlflow.set_tracking_uri(uri)
    try:
        exp = mlflow.MlflowClient(uri).create_experiment("lending-team", artifact_location=(root / "team").as_uri())
        # pip_requirements given: MLflow infers them by loading the model in a child interpreter (10-60 s a call
        # on a loaded 2-core machine); the gate never reads them
        with mlflow.start_run(experiment_id=exp):
            versions = {name: mlflow.sklearn.log_model(
                model, name=name, serialization_format="skops", registered_model_name="lending",
                pip_requirements=["scikit-learn"],
                skops_trusted_types=sio.get_untrusted_types(data=sio.dumps(model))).registered_model_version
                for name, model in (("fair", fair), ("unfair", unfair))}
    finally:
        import mlflow.tracking._tracking_service.utils as tracking_utils

        tracking_utils._tracking_uri = None
    return {"root": root, "uri": uri, "versions": {k: str(v) for k, v in versions.items()}, "truth": truth}


def test_a_lending_file_of_ordinary_size_is_decided_in_the_right_direction(lending, tmp_path, harness, capfd):
    from faux_checks_app.cli import main

    root, versions, truth = lending["root"], lending["versions"], lending["truth"]
    assert np.mean(truth["fair"] > 0.1) == 0.0 and np.mean(truth["unfair"] > 0.1) > 0.10
    code = main(["gate", "lending", "--data", str(root / "applications.csv"), "--policy", str(root / "policy.toml"),
                 "--tracking-uri", lending["uri"], "--report-dir", str(tmp_path / "reports"), "--json",
                 "--trust-type", TREE_PREDICTOR])
    out = {o["model"]["version"]: o for o in map(json.loads, filter(None, capfd.readouterr().out.splitlines()))}
    decisions = {name: out[v]["decision"] for name, v in versions.items()}
    assert decisions == {"fair": "passed", "unfair": "failed"}, {v: o["reasons"][:3] for v, o in out.items()}
    assert code == 1

    report = json.loads(Path(out[versions["unfair"]]["report"]).read_text())
    check = report["check"]
    assert check["n_individuals"] == 2400                         # the rows with a missing value are audited too
    table = {row["group"]: row for row in check["group_table"]}
    assert table["majority"]["most_favoured"] and not table["minority"]["most_favoured"]
    assert table["minority"]["impact_ratio"] < 1.0                 # the minority is denied more often
    flagged = out[versions["unfair"]]["attributes"][0]["flagged_fraction"]
    lower, upper = (out[versions["unfair"]]["attributes"][0][k] for k in ("flagged_fraction_lower",
                                                                           "flagged_fraction_upper"))
    assert lower > 0.05 and flagged == pytest.approx(np.mean(truth["unfair"] > 0.1), abs=0.08)
    assert upper >= lower
