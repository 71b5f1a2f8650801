"""The inputs of the first-hour journey (tests/app/test_first_hour_journey.py, scripts/first_hour_screenshot.py).

Bank marketing (UCI 222, ``../shared/data/bank_marketing/bank-additional.csv``, ';'-separated, text label ``y``
yes/no): the first 1,500 rows, written back ';'-separated with a protected column ``age_group`` ("55+": 153 rows,
10.2%; "under 55"). Versions logged with MLflow's own API into a sqlite registry:

- ``bank`` v1: a fitted scikit-learn ``Pipeline`` (ColumnTransformer + LogisticRegression) on the raw columns,
  ``mlflow.sklearn.log_model`` with skops serialization and no feature spec (the pipeline's own transformer is it);
- ``bank`` v2: an XGBoost booster, ``mlflow.xgboost.log_model`` with ``extra_files=[feature_spec.json]``;
- ``bank`` v3: a torch MLP, ``mlflow.pytorch.log_model`` (MLflow 3's default pt2) with the same extra file;
- ``bank-age`` v1: a torch module that reads ``age`` only for retired people (``job`` is declared admissible, so
  held fixed), logged like v3: nearly all its flagged rows are in the small "55+" group.

None of the ``bank`` models takes ``age``; with ``job`` declared admissible they pass at δ = 0.1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

BANK = Path(__file__).resolve().parents[2] / "shared" / "data" / "bank_marketing" / "bank-additional.csv"  # ../shared
NUMERIC = ["campaign", "previous", "euribor3m", "cons.conf.idx"]
CATEGORICAL = ["job", "education", "housing", "contact"]
N_ROWS = 1500

#: The policy a data scientist writes for this data (the one the first gate forgot).
POLICY = """\
protected = "age_group"
label = "y"
positive_label = "yes"
min_aux_quality = 0.6

[faux]
delta = 0.1
max_flagged_fraction = 0.1
admissible = ["job"]

[aux]
epochs = 20

[decision]
min_group_rows = 15
aux_seeds = 1
max_group_flagged_fraction = 0.15
"""


def bank_frame() -> pd.DataFrame:
    """The first :data:`N_ROWS` rows of bank-additional.csv with ``age_group``; ``y`` stays text (yes/no)."""
    df = pd.read_csv(BANK, sep=";").iloc[:N_ROWS].reset_index(drop=True)
    df["age_group"] = np.where(df["age"] >= 55, "55+", "under 55")
    return df


def _pipeline(df: pd.DataFrame):
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    ct = ColumnTransformer([("num", StandardScaler(), NUMERIC),
                            ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False), CATEGORICAL)])
    return Pipeline([("prep", ct), ("clf", LogisticRegression(max_iter=500))]).fit(df[NUMERIC + CATEGORICAL],
                                                                                 df["y"] == "yes")


def _mlp(X: np.ndarray, y: np.ndarray):
    import torch

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.Adam(mlp.parameters(), lr=0.05)
    Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.float32)
    for _ in range(60):
        opt.zero_grad()
        torch.nn.functional.binary_cross_entropy_with_logits(mlp(Xt)[:, 0], yt).backward()
        opt.step()
    return mlp.eval()


def retired_age_model(spec):
    """logit = −2 + 0.3·euribor3m + 3·[job = retired]·age (standardised): age is read for retired people only."""
    import torch

    names = spec.feature_names
    i_age, i_retired, i_rate = names.index("age"), names.index("job=retired"), names.index("euribor3m")

    class RetiredAge(torch.nn.Module):
        def forward(self, x):
            return (-2.0 + 0.3 * x[:, i_rate] + 3.0 * x[:, i_retired] * x[:, i_age])[:, None]

    return RetiredAge().eval()


def build_journey(root: Path) -> dict:
    """Write the data and policy under ``root`` and log the four versions; returns paths, URI and versions.

    Uses ``mlflow.set_tracking_uri`` for the logging only (restored after); the experiment's artifacts live
    under ``root`` (MLflow's default would be ./mlruns).
    """
    import mlflow
    import torch
    import xgboost as xgb

    from faux_checks.inputs.tabular import FeatureSpec

    root = Path(root)
    df = bank_frame()
    data = root / "gate.csv"
    df.to_csv(data, sep=";", index=False)            # the data as the user has it: ';'-separated, yes/no labels
    policy = root / "bank.toml"
    policy.write_text(POLICY)
    uri = f"sqlite:///{root}/mlflow.db"
    y = (df["y"] == "yes").to_numpy()
    spec = FeatureSpec.fit(df, NUMERIC + CATEGORICAL, name="bank spec")
    with_age = FeatureSpec.fit(df, ["age"] + NUMERIC + CATEGORICAL, name="bank spec with age")
    for folder, s in (("spec", spec), ("spec-age", with_age)):
        (root / folder).mkdir()
        s.save(root / folder / "feature_spec.json")
    X, X_age = spec.encode(df), with_age.encode(df)
    booster = xgb.train({"max_depth": 3, "eta": 0.3, "objective": "binary:logistic", "seed": 0},
                        xgb.DMatrix(X, label=y.astype(float)), num_boost_round=20)
    mlflow.set_tracking_uri(uri)
    try:
        exp = mlflow.MlflowClient(uri).create_experiment("bank-team", artifact_location=(root / "team").as_uri())
        with mlflow.start_run(experiment_id=exp):
            v = [mlflow.sklearn.log_model(_pipeline(df), name="pipeline", serialization_format="skops",
                                          registered_model_name="bank", pip_requirements=["scikit-learn"]
                                          ).registered_model_version,
                 mlflow.xgboost.log_model(booster, name="booster", registered_model_name="bank", pip_requirements=[],
                                          extra_files=[str(root / "spec" / "feature_spec.json")]
                                          ).registered_model_version,
                 mlflow.pytorch.log_model(_mlp(X, y), name="mlp", input_example=X[:16].astype(np.float32),
                                          registered_model_name="bank", pip_requirements=["torch"],
                                          extra_files=[str(root / "spec" / "feature_spec.json")]
                                          ).registered_model_version]
            age = mlflow.pytorch.log_model(retired_age_model(with_age), name="retired-age",
                                           input_example=torch.as_tensor(X_age[:16], dtype=torch.float32).numpy(),
                                           registered_model_name="bank-age", pip_requirements=["torch"],
                                           extra_files=[str(root / "spec-age" / "feature_spec.json")]
                                           ).registered_model_version
    finally:   # unset, so MLflow reads MLFLOW_TRACKING_URI again (not the value it had when this began)
        import mlflow.tracking._tracking_service.utils as tracking_utils

        tracking_utils._tracking_uri = None
    return {"root": root, "data": data, "policy": policy, "uri": uri, "frame": df,
            "versions": {"pipeline": str(v[0]), "booster": str(v[1]), "mlp": str(v[2])}, "age_version": str(age)}
