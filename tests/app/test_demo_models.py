"""Demo model helpers: bias injection, deterministic training, TorchScript export, demo versions."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from faux_checks import FeatureSpec
from faux_checks.inputs.datasets import ADULT_FEATURES, load_adult
from faux_checks.groundtruth.labels import inject_historical_bias
from faux_checks_app.demo import (
    AUDIT_FILENAME,
    TargetMLP,
    build_demo_versions,
    definitional_truth,
    train_target,
)
from faux_checks.errors import InputError
from faux_checks.inputs.models import load_model, save_torchscript


@pytest.fixture(scope="module")
def train_rows() -> pd.DataFrame:
    return load_adult(split="train")


@pytest.fixture(scope="module")
def small(train_rows):
    """2,000 encoded training rows (seeded sample) and their labels."""
    rows = train_rows.sample(2_000, random_state=0)
    spec = FeatureSpec.fit(rows, ADULT_FEATURES, min_frequency=50)
    return spec.encode(rows), rows["income"].to_numpy()


# ---------------------------------------------------------------- inject_historical_bias
@pytest.mark.parametrize("rate", [0.0, 0.1, 0.5, 0.75, 1.0])
def test_bias_flips_exactly_the_documented_share_of_disadvantaged_positives(train_rows, rate):
    before = train_rows.copy()
    y = inject_historical_bias(train_rows, rate=rate, seed=3)
    pd.testing.assert_frame_equal(train_rows, before)          # input not modified
    women_pos = (train_rows["sex"] == "Female") & (train_rows["income"] == 1)
    changed = y != train_rows["income"]
    assert int(changed.sum()) == round(rate * int(women_pos.sum()))
    assert not (changed & ~women_pos).any()                     # nobody else, no negative, touched
    assert (y[changed] == 0).all()
    assert y.index.equals(train_rows.index) and y.name == "income" and y.dtype == np.int64


def test_bias_rounding_seed_and_other_group():
    df = pd.DataFrame({"sex": ["F"] * 7 + ["M"] * 5, "y": [1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 0]},
                      index=np.arange(100, 112))
    a = inject_historical_bias(df, disadvantaged="F", label="y", rate=0.5, seed=1)
    b = inject_historical_bias(df, disadvantaged="F", label="y", rate=0.5, seed=1)
    pd.testing.assert_series_equal(a, b)
    assert int((df["y"] - a).sum()) == round(0.5 * 5) == 2      # Python rounds half to even
    assert (a[df["sex"] == "M"] == df["y"][df["sex"] == "M"]).all()
    choices = {tuple(inject_historical_bias(df, disadvantaged="F", label="y", rate=0.4, seed=s)) for s in range(20)}
    assert len(choices) > 1                                     # the seed chooses which rows


@pytest.mark.parametrize("rate", [-0.1, 1.5, float("nan")])
def test_bias_rejects_bad_rate(train_rows, rate):
    with pytest.raises(InputError, match="rate"):
        inject_historical_bias(train_rows, rate=rate, seed=0)


def test_bias_rejects_non_binary_label_and_missing_column():
    df = pd.DataFrame({"sex": ["Female", "Male"], "income": [">50K", "<=50K"]})
    with pytest.raises(InputError, match="0 and 1"):
        inject_historical_bias(df, rate=0.5, seed=0)
    with pytest.raises(InputError, match="not found"):
        inject_historical_bias(df.drop(columns="sex"), rate=0.5, seed=0)


# ---------------------------------------------------------------- train_target
def test_train_target_is_deterministic_per_seed(small):
    X, y = small
    threads = torch.get_num_threads()
    a = train_target(X, y, epochs=3, seed=7)
    b = train_target(X, y, epochs=3, seed=7)
    c = train_target(X, y, epochs=3, seed=8)
    assert torch.get_num_threads() == threads                  # restored
    assert not a.training
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def test_train_target_learns_and_leaves_global_rng(small):
    X, y = small
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    model = train_target(X, y, epochs=20, seed=0)
    assert torch.equal(torch.rand(3), expected)
    with torch.no_grad():
        out = model(torch.as_tensor(X))
    assert out.shape == (len(X),)
    assert ((out > 0).numpy() == y).mean() > 0.8               # well above the 75% majority class


def test_train_target_input_errors(small):
    X, y = small
    with pytest.raises(InputError, match="rows"):
        train_target(X, y[:-1])
    with pytest.raises(InputError, match="0 and 1"):
        train_target(X, y * 2)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        train_target(bad, y)


def test_torchscript_export_reloads_with_same_outputs(small, tmp_path):
    X, y = small
    model = train_target(X, y, epochs=1, seed=0)
    path = save_torchscript(model, tmp_path / "target.pt")
    loaded = load_model(path)
    x = torch.as_tensor(X[:500])
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))
    assert isinstance(TargetMLP(4), torch.nn.Module)


# ---------------------------------------------------------------- build_demo_versions
def test_build_demo_versions_layout(tmp_path):
    versions = build_demo_versions(tmp_path, seed=0, epochs=1)
    assert [v.name for v in versions] == ["v1", "v2", "v3", "v4", "v5"]
    assert [v.uses_protected for v in versions] == [False, False, True, True, False]
    audit = pd.read_csv(tmp_path / AUDIT_FILENAME)
    assert len(audit) == 15_060 and {"sex", "income"} <= set(audit.columns) and "split" not in audit
    for v in versions:
        assert v.audit_path == tmp_path / AUDIT_FILENAME
        spec = FeatureSpec.load(v.spec_path)
        assert spec.source_columns == v.recipe["feature_columns"]
        model = load_model(v.model_path)
        with torch.no_grad():
            out = model(torch.as_tensor(spec.encode(audit.head(50))))
        assert out.shape == (50,)
    spec, spec_sex = FeatureSpec.load(versions[0].spec_path), FeatureSpec.load(versions[2].spec_path)
    assert spec_sex.source_columns == spec.source_columns + ["sex"]
    assert "native-country=__infrequent__" in spec.feature_names   # min_frequency=50 grouped rare levels
    mask = spec_sex.feature_mask("sex")
    assert np.array_equal(spec_sex.encode(audit)[:, ~mask], spec.encode(audit)) and mask.sum() == 2
    canonical = FeatureSpec.load(versions[4].spec_path)
    assert "relationship=Spouse" in canonical.feature_names
    assert "relationship=Husband" not in canonical.feature_names and "relationship=Wife" not in canonical.feature_names
    husband_wife = audit[audit["relationship"].isin(["Husband", "Wife"])].head(20)
    assert (canonical.encode(husband_wife)[:, canonical.feature_names.index("relationship=Spouse")] == 1).all()
    assert versions[1].recipe["bias"]["rate"] == 0.75 and versions[0].recipe["labels"].startswith("income as")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [v["name"] for v in manifest["versions"]] == ["v1", "v2", "v3", "v4", "v5"]
    with pytest.raises(InputError, match="never overwrites"):
        build_demo_versions(tmp_path, seed=0, epochs=1)
    # v5 cannot see Husband/Wife and not sex: the definitional counterfactual moves nobody
    truth = definitional_truth(versions[4], delta=0.0, audit=audit.head(400))
    assert truth["share"] == 0.0 and truth["share_married"] == 0.0 and truth["n"] == 400
    assert definitional_truth(versions[2], delta=0.0, audit=audit.head(400))["share"] > 0.9   # sex is an input
