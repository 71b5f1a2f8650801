"""``faux_checks.check(model, df, protected=...)`` and its rich result.

The numbers are the engine's: the same model, data and policy through ``check_one_attribute`` give the same scores to the
bit, and the DataFrames hold exactly what the engine's result holds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import faux_checks
from _support import linear, make_data
from faux_checks import InputError, load_policy
from faux_checks.gate.one_attribute import check_one_attribute

SETTINGS = {"aux": {"epochs": 20}, "decision": {"min_group_rows": 20, "aux_seeds": 1},
            "faux": {"delta": 0.05, "max_flagged_fraction": 0.1}, "target_output": "logit"}


def _policy(**top):
    base = load_policy(protected="sex").model_dump()
    for key, value in SETTINGS.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) else value
    base.update(label=None, **top)
    return faux_checks.Policy.model_validate(base)


@pytest.fixture(scope="module")
def data():
    df = make_data(400, seed=0)
    df["race"] = np.where(np.random.default_rng(1).random(len(df)) < 0.5, "A", "B")
    return df


def test_check_is_check_one_attribute_and_its_dataframes_hold_the_engines_numbers(data, tmp_path, monkeypatch):
    monkeypatch.setenv("FAUX_CHECKS_REPORT_PLOTS", "on")   # the page's figure is asserted below
    model = linear([1.0, 0, 0, 0, 2.0])
    policy = _policy()
    res = faux_checks.check(model, data.drop(columns=["y", "race"]), protected="sex", policy=policy)
    engine = check_one_attribute(model, data.drop(columns=["y", "race"]), policy=policy)
    assert res.decision == engine.decision == "failed" and res.exit_code == 1
    np.testing.assert_array_equal(res.scores["lic_score"].to_numpy(), engine.scores)
    assert list(res.rules["rule"]) == [r["rule"] for r in engine.rules]
    assert res.by_group.loc[("sex", "M"), "flagged_fraction"] == engine.by_group.loc["M", "flagged_fraction"]
    page = res._repr_html_()
    assert "FAILED" in page and "max_flagged_fraction" in page and "data:image/png;base64," in page
    assert f"{engine.flagged_fraction:.2%}" in page
    ax = res.plot()
    assert [round(line.get_ydata()[0], 6) for line in ax.get_lines()] == [0.1, 0.2]   # overall and per-group limits
    out = res.save_html(tmp_path / "check.html")
    assert "Limitations of this run" in out.read_text()
    with pytest.raises(InputError, match="exists already"):
        res.save_html(out)


def test_check_with_several_attributes_and_the_shipped_policy(data):
    model = linear([1.0, 0, 0, 0, 2.0])
    with pytest.raises(InputError, match=r"name the protected attribute"):
        faux_checks.check(model, data)
    res = faux_checks.check(model, data.drop(columns="y"), protected=["sex", "race"], policy=_policy())
    assert set(res.by_group.index.get_level_values("attribute")) == {"sex", "race"}
    assert {"lic_score[sex]", "lic_score[race]"} <= set(res.scores.columns) and len(res.scores) == len(data)
    assert "attribute" in res.rules.columns and res.decision == "failed"
    assert res.result["sex"].decision == "failed"


def test_check_takes_a_pipeline_as_it_is_and_never_shows_progress_outside_a_notebook(data, capsys):
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    cols = ["f0", "f1", "f2", "f3", "proxy"]
    pipe = Pipeline([("prep", ColumnTransformer([("num", StandardScaler(), cols)])),
                     ("clf", LogisticRegression())]).fit(data[cols], data["y"])
    res = faux_checks.check(pipe, data.drop(columns="race"), protected="sex", label="y",
                            policy=_policy(target_output="auto"))
    assert res.result["sex"].provenance["target_access"].startswith("forward (scikit-learn, in memory)")
    assert "%|" not in capsys.readouterr().err                               # no tqdm lines
    assert isinstance(res.rules, pd.DataFrame) and repr(res) == repr(res.result)


def test_scores_keep_the_callers_index_on_a_filtered_shuffled_frame_and_a_join(data):
    """``df.assign(s=res.scores["lic_score"])`` and joins give each person their own score, never a neighbour's."""
    model = linear([1.0, 0, 0, 0, 2.0])
    frame = data.drop(columns=["y", "race"])
    sub = frame[frame["f0"] > -0.5].sample(frac=1.0, random_state=3)           # filtered and shuffled labels
    sub.index = sub.index + 1000                                               # and none of them 0..n-1
    res = faux_checks.check(model, sub, protected="sex", policy=_policy())
    engine = res.result["sex"].scores                                          # the engine's: by position in sub
    assert len(sub) < len(frame) and np.isfinite(engine).sum() > 100
    assert res.scores.index.equals(sub.index)
    assigned = sub.assign(s=res.scores["lic_score"])["s"].to_numpy()
    np.testing.assert_array_equal(assigned, engine)                           # row i of sub gets engine score i
    joined = frame.set_axis(frame.index + 1000).join(res.scores, how="inner")  # the unfiltered frame, by label
    assert len(joined) == len(sub)
    position = {label: i for i, label in enumerate(sub.index)}
    np.testing.assert_array_equal(joined["lic_score"].to_numpy(),
                                  engine[[position[label] for label in joined.index]])
    np.testing.assert_array_equal(joined["proxy"].to_numpy(), sub.loc[joined.index, "proxy"].to_numpy())


def test_save_html_never_writes_through_a_symlink(data, tmp_path):
    import os

    res = faux_checks.check(linear([1.0, 0, 0, 0, 2.0]), data.drop(columns=["y", "race"]).head(200),
                            protected="sex", policy=_policy())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    dangling = tmp_path / "page.html"
    os.symlink(elsewhere / "target.html", dangling)                            # points at nothing yet
    with pytest.raises(InputError, match=r"page.html is a symbolic link \(to .*target.html\), and nothing is written "
                                         r"through a link; choose another path"):
        res.save_html(dangling)
    assert not (elsewhere / "target.html").exists() and dangling.is_symlink()
    existing = elsewhere / "kept.html"
    existing.write_text("mine")
    os.symlink(existing, tmp_path / "live.html")
    with pytest.raises(InputError, match="is a symbolic link"):
        res.save_html(tmp_path / "live.html")
    assert existing.read_text() == "mine"
    out = res.save_html(tmp_path / "new.html")
    assert not out.is_symlink() and "Limitations of this run" in out.read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left behind
