"""The estimator as the data scientist holds it, gated on raw bank-marketing rows.

A fitted scikit-learn Pipeline (ColumnTransformer + LogisticRegression) in memory, through a skops file and
through ``mlflow.sklearn.log_model``; an in-memory XGBoost, LightGBM and scikit-learn classifier on the encoded
matrix. Truth: the probability the gate reads for a flagged person equals the model's own ``predict_proba`` on
that person's raw row, and every route gives the same scores to the last bit.
Data: ../shared/data/bank_marketing/bank-additional.csv (UCI 222, 4,119 rows, ';'-separated).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("sklearn")

from faux_checks import ForwardOnlyTarget, as_target, from_column_transformer, load_policy  # noqa: E402
from faux_checks.gate.one_attribute import check_one_attribute
from faux_checks.errors import InputError  # noqa: E402

BANK = Path(__file__).resolve().parents[3] / "shared" / "data" / "bank_marketing" / "bank-additional.csv"  # ../shared
NUMERIC = ["campaign", "previous", "euribor3m", "cons.conf.idx"]
CATEGORICAL = ["job", "education", "housing", "contact"]
POLICY = dict(protected="age_group", label="y", min_aux_quality=0.55)


def _policy():
    policy = load_policy(**POLICY)
    return policy.model_copy(update={
        "aux": policy.aux.model_copy(update={"epochs": 20}),
        "decision": policy.decision.model_copy(update={"min_group_rows": 20, "aux_seeds": 1}),
        "faux": policy.faux.model_copy(update={"delta": 0.05})})


@pytest.fixture(scope="module")
def bank() -> pd.DataFrame:
    if not BANK.exists():
        pytest.skip(f"{BANK} is not on this machine")
    df = pd.read_csv(BANK, sep=";").iloc[:1200].reset_index(drop=True)
    df["age_group"] = np.where(df["age"] >= 45, "45+", "under 45")
    df["y"] = (df["y"] == "yes").astype(int)
    return df


@pytest.fixture(scope="module")
def pipe(bank):
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    ct = ColumnTransformer([("num", StandardScaler(), NUMERIC),
                            ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), CATEGORICAL)])
    model = Pipeline([("prep", ct), ("clf", LogisticRegression(C=1.0, max_iter=500))])
    return model.fit(bank[NUMERIC + CATEGORICAL], bank["y"])


@pytest.fixture(scope="module")
def in_memory(bank, pipe):
    return check_one_attribute(pipe, bank, policy=_policy())


def _own_probability(pipe, bank, result):
    rows = [t["row"] for t in result.top_flagged]
    return np.array([t["probability"] for t in result.top_flagged]), pipe.predict_proba(bank.iloc[rows])[:, 1]


def test_a_fitted_pipeline_in_memory_gates_on_raw_rows_and_reads_the_models_own_probability(bank, pipe, in_memory):
    res = in_memory
    assert res.decision in ("passed", "failed", "undecided") and res.n_individuals == len(bank)
    assert res.provenance["target_access"].startswith("forward (scikit-learn, in memory); features: the pipeline's")
    assert res.provenance["n_features"] == len(pipe[0].get_feature_names_out())       # 4 numbers + one-hot levels
    assert set(res.evidence.columns) == set(NUMERIC + CATEGORICAL)                     # evidence in raw columns
    assert res.top_flagged, "the check flagged nobody: the probability comparison below would test nothing"
    gate_p, own_p = _own_probability(pipe, bank, res)
    np.testing.assert_allclose(gate_p, own_p, rtol=0, atol=1e-6)   # the gate encodes in float32


def test_the_pipeline_gives_the_same_scores_as_its_transformer_as_spec_and_the_rest_as_a_forward_only_target(
        bank, pipe, in_memory):
    spec = from_column_transformer(pipe[0])
    target = ForwardOnlyTarget(lambda x: pipe[1:].predict_proba(x), access="by hand", output_form="softmax")
    by_hand = check_one_attribute(target, bank, policy=_policy(), feature_spec=spec)
    np.testing.assert_array_equal(by_hand.scores, in_memory.scores)
    assert by_hand.decision == in_memory.decision


@pytest.mark.slow
def test_a_pipeline_logged_with_mlflow_sklearn_skops_gates_on_raw_rows(bank, pipe, in_memory, tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("skops")
    from faux_checks.inputs.models import load_model
    from faux_checks.registry.formats import mlflow_model_file

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    with mlflow.start_run():
        info = mlflow.sklearn.log_model(pipe, name="model", serialization_format="skops",
                                        skops_trusted_types=[], registered_model_name="bank-pipe",
                                        pip_requirements=["scikit-learn"])
    folder = Path(mlflow.artifacts.download_artifacts(info.model_uri, dst_path=str(tmp_path / "dl")))
    path = mlflow_model_file(folder)
    assert path.name.endswith(".skops")
    target = load_model(path)
    assert target.feature_spec is not None and target.feature_spec.n_features == target.n_features
    res = check_one_attribute(target, bank, policy=_policy())
    np.testing.assert_array_equal(res.scores, in_memory.scores)
    assert res.provenance["target_access"].startswith("forward (scikit-learn via skops); features: the pipeline's")


@pytest.mark.slow
def test_a_registered_pipeline_gates_through_the_registry_download_and_the_gate_suite(bank, pipe, in_memory, tmp_path,
                                                                                      monkeypatch):
    """The gate flow's own steps without Prefect: Registry.download of version 1, then the GX suite (faux_checks_flows.gate.validate)."""
    mlflow = pytest.importorskip("mlflow")
    pytest.importorskip("skops")
    pytest.importorskip("great_expectations")
    from faux_checks_gx import build_suite, validate_frame
    from faux_checks.registry import Registry

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    with mlflow.start_run():
        mlflow.sklearn.log_model(pipe, name="model", serialization_format="skops", registered_model_name="bank-pipe",
                                 pip_requirements=["scikit-learn"])
    model_path, spec_path = Registry(uri).download("bank-pipe", "1", tmp_path / "v1")
    assert spec_path is None and str(model_path).endswith(".skops")          # no spec attached: the pipeline's own
    outcome = validate_frame(bank, build_suite(_policy(), model_path=str(model_path)))
    assert outcome.decision == in_memory.decision
    np.testing.assert_allclose(outcome.check["flagged_fraction"], in_memory.flagged_fraction, rtol=0, atol=0)


def test_a_spec_of_another_width_next_to_a_pipeline_names_both_widths_and_the_fix(bank, pipe):
    from faux_checks import FeatureSpec

    wrong = FeatureSpec.passthrough(bank[NUMERIC])
    with pytest.raises(InputError) as err:
        as_target(pipe, wrong)
    msg = str(err.value)
    assert f"encodes 4 features but the pipeline's ColumnTransformer outputs {pipe[0].transform(bank.iloc[:1]).shape[1]}" in msg
    assert "pass no feature spec" in msg


def test_a_width_mismatch_says_the_fix_once_and_an_unknown_object_names_its_type(bank):
    target = ForwardOnlyTarget(lambda x: np.zeros((len(x), 1)), access="by hand", n_features=3)
    with pytest.raises(InputError) as err:
        check_one_attribute(target, bank, policy=_policy(), feature_spec=from_column_transformer(_ct(bank)))
    msg = str(err.value)
    assert "expects 3 encoded features but X has" in msg
    assert msg.lower().count("pass the feature spec") == 1, msg
    with pytest.raises(InputError, match=r"the target model is a builtins\.dict; the gate takes a torch\.nn\.Module"):
        check_one_attribute({"not": "a model"}, bank, policy=_policy())


def _ct(bank):
    from sklearn.compose import ColumnTransformer
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    return ColumnTransformer([("num", StandardScaler(), NUMERIC),
                              ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), CATEGORICAL)]
                             ).fit(bank[NUMERIC + CATEGORICAL])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sklearn", "xgboost", "lightgbm", "torch"])
def test_in_memory_estimators_on_the_encoded_matrix_read_their_own_probability(bank, kind):
    spec = from_column_transformer(_ct(bank))
    X = spec.transform(bank)
    y = bank["y"].to_numpy()
    if kind == "sklearn":
        from sklearn.ensemble import RandomForestClassifier
        model = RandomForestClassifier(n_estimators=20, max_depth=4, random_state=0).fit(X, y)
        own = lambda x: model.predict_proba(x)[:, 1]                               # noqa: E731
    elif kind == "xgboost":
        xgb = pytest.importorskip("xgboost")
        model = xgb.XGBClassifier(n_estimators=20, max_depth=3, random_state=0).fit(X, y)
        own = lambda x: model.predict_proba(x.astype(np.float32))[:, 1]            # noqa: E731
    elif kind == "lightgbm":
        lgb = pytest.importorskip("lightgbm")
        model = lgb.LGBMClassifier(n_estimators=20, max_depth=3, random_state=0, verbose=-1).fit(X, y)
        own = lambda x: model.predict_proba(x)[:, 1]                               # noqa: E731
    else:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).eval()
        own = lambda x: torch.sigmoid(model(torch.as_tensor(x, dtype=torch.float32))).detach().numpy()[:, 0]  # noqa: E731
    target, used = as_target(model, spec)
    assert used is spec                                                              # the given spec, not replaced
    assert (target is model) == (kind == "torch")
    res = check_one_attribute(model, bank, policy=_policy(), feature_spec=spec)
    assert res.n_individuals == len(bank)
    if not res.top_flagged:
        pytest.skip(f"{kind}: nobody flagged at δ = 0.05; the probability comparison needs a flagged row")
    rows = [t["row"] for t in res.top_flagged]
    np.testing.assert_allclose([t["probability"] for t in res.top_flagged], own(X[rows]), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_the_streaming_scorer_takes_a_skops_pipeline_on_raw_rows(bank, pipe, tmp_path):
    pytest.importorskip("skops")
    import skops.io as sio

    from faux_checks import score_stream
    from faux_checks.inputs.models import load_model

    sio.dump(pipe, tmp_path / "pipe.skops")
    bank.to_csv(tmp_path / "bank.csv", sep=";", index=False)
    target = load_model(tmp_path / "pipe.skops")
    summary = score_stream(target, tmp_path / "bank.csv", policy=_policy(), out_path=tmp_path / "scores.csv")["age_group"]
    assert summary.n_individuals == len(bank)
    scores = pd.read_csv(tmp_path / "scores.csv")
    assert len(scores) == len(bank) and scores["lic_score"].notna().all()
