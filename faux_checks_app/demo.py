"""Demo model versions on UCI Adult: what a model team would push through the gate over time.

:func:`build_demo_versions` trains and exports (TorchScript) income classifiers that differ in one
documented way each, plus the feature specs and an audit dataset, so that the gate, the CLI and
the flows can be run end to end on real data:

==== ================================================ ============================================
name labels                                           inputs
==== ================================================ ============================================
v1   original                                         ADULT_FEATURES (no sex)
v2   historical bias against women (see below)        ADULT_FEATURES (no sex)
v3   original                                         ADULT_FEATURES + sex (direct term exercised)
v4   historical bias against women                    ADULT_FEATURES + sex
==== ================================================ ============================================

Nothing here decides whether a version passes: the decision is the gate's, from its policy. The
measurements behind the default policy's numbers are produced by :func:`measure_demo_versions`
(``python -m faux_checks_app.demo --seeds 0 1 2``), which calls the fAux engine directly.

Historical bias (:func:`inject_historical_bias`) is label bias: the outcome of some qualified
members of the disadvantaged group was recorded as unfavourable, so the training labels depend on
the protected attribute beyond what the features explain. (This is our mechanism for a real
dataset; the paper's synthetic benchmark sets the y–c dependence through its data generator
instead; see docs/method.md.) The target model never sees the protected attribute in v2; it can only
reproduce the bias through correlated features (proxies).

Measurements (``python -m faux_checks_app.demo --seeds 0 1 2 --variants faux ng``; seeds 0, 1, 2 for
training, bias injection and the aux model; 15,060 audit rows; aux ROC-AUC 0.933–0.940; variant
``faux`` = eq. 9 with the aux logit, no ridge; flagged = LIC score > δ; DP = P(ŷ=1|Male) −
P(ŷ=1|Female), ŷ = [p > 0.5]; bias rate 0.75):

======= ============= ============= ============= ============= ==================
version DP            p99 score     flagged δ=.02 flagged δ=.05 fAux+NG |cos| > 0.4
======= ============= ============= ============= ============= ==================
v1      0.163–0.188   0.029–0.037   3.0–7.0%      0.15–0.21%    6.9–10.4%
v2      0.241–0.289   0.031–0.040   3.6–7.0%      0.11–0.39%    36–46%
v3      0.173–0.203   0.245–0.388   56–61%        39–48%        (no direct term)
v4      0.249–0.302   0.699–0.782   66–68%        57–59%        (no direct term)
======= ============= ============= ============= ============= ==================

- A direct dependence on sex (v3, v4) is flagged by eq. 9 at every δ in [0.01, 0.1]; at δ = 0.05
  the flagged fraction is 39–59% against at most 0.39% for the sex-blind versions.
- Historical label bias learnt through proxies (v2) is **not** separated from v1 by eq. 9 in
  logit units at any δ, and not at any bias rate in {0.25, 0.5, 0.75, 1.0} (at 1.0 it is higher
  than v1 within each seed but the seeds overlap). Our reading: v2 is more confident for women
  (mean p(1−p) among women 0.040 against v1's 0.060, seed 0), which shrinks the gradient of the
  probability that eq. 9 uses. Changing the aux seed (1, 2 with the seed-0 targets) moves no
  version's flagged fraction at δ = 0.05 by more than 0.1 point. The same v2 is separated by its DP gap
  and by fAux+NG (eq. 10) at |cos| > 0.4 (v1 ≤ 10.4%, v2 ≥ 36% at rate 0.75; at rate 0.5 the
  margin is thin: v2 ≥ 16%).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from faux_checks._threads import one_torch_thread
from faux_checks._validation import fmt_count, require_columns
from faux_checks.errors import InputError
from faux_checks.inputs.datasets import ADULT_FEATURES, load_adult
from faux_checks.inputs.models import save_torchscript
from faux_checks.inputs.tabular import FeatureSpec
from faux_checks.method._batching import as_tensor

__all__ = [
    "AUDIT_FILENAME",
    "DEFAULT_BIAS_RATE",
    "DemoVersion",
    "TargetMLP",
    "build_demo_versions",
    "inject_historical_bias",
    "measure_demo_versions",
    "protected_direct_term",
    "train_target",
]

#: Share of the women's positive (>50K) training labels flipped to 0 in v2 and v4: the women's
#: >50K rate in training falls from 11.4% to 2.8%. Why 0.75: see "Measurements" in the module
#: docstring (the smallest rate of 0.25/0.5/0.75/1.0 at which v2 differs from v1 beyond seed noise
#: in its demographic-parity gap and its fAux+NG scores).
DEFAULT_BIAS_RATE = 0.75
#: File name of the audit dataset written by :func:`build_demo_versions` in its workdir.
AUDIT_FILENAME = "adult_audit.csv"
#: Rare levels (fewer training rows than this) are grouped (docs/method.md, "Evidence measured on Adult").
MIN_FREQUENCY = 50


class TargetMLP(nn.Module):
    """Income classifier: an MLP x ↦ one logit (log-odds of income >50K).

    Parameters
    ----------
    d : int
        Number of encoded input features.
    hidden : sequence of int
        Hidden layer widths (ReLU).

    Input shape (b, d) float32; output shape (b,), the logit (declare the target's output form
    as ``"logit"``).
    """

    def __init__(self, d: int, hidden: Sequence[int] = (64, 64)):
        super().__init__()
        layers: list[nn.Module] = []
        width = int(d)
        for h in hidden:
            layers += [nn.Linear(width, int(h)), nn.ReLU()]
            width = int(h)
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x)[:, 0]


def train_target(
    X,
    y,
    *,
    epochs: int = 20,
    seed: int = 0,
    lr: float = 1e-3,
    batch_size: int = 512,
    hidden: Sequence[int] = (64, 64),
) -> TargetMLP:
    """Train a :class:`TargetMLP` with Adam on the binary cross-entropy; deterministic per seed.

    Parameters
    ----------
    X : array or Tensor of shape (n, d)
        Encoded features (e.g. ``FeatureSpec.encode``).
    y : array-like of shape (n,)
        Labels in {0, 1}.
    epochs, lr, batch_size, hidden : training settings (no early stopping, no weight decay).
    seed : int
        Seeds the initialisation and the batch order; the global torch RNG is left as it was.
        Training runs on one torch thread (the previous setting is restored), so the same data
        and seed give bit-identical weights on any machine with the same torch build.

    Returns
    -------
    TargetMLP
        In eval mode.

    Raises
    ------
    InputError
        Shapes differ, X is not finite, or y holds values other than 0 and 1.
    """
    X = as_tensor(X)
    labels = np.asarray(y, dtype=np.float64)
    n, d = X.shape
    if labels.shape != (n,):
        raise InputError(f"X has {fmt_count(n)} rows but y has shape {labels.shape}; expected ({n},)")
    if n == 0:
        raise InputError("train_target: no training rows")
    if not torch.isfinite(X).all():
        raise InputError("X holds NaN or infinite values; encode and clean the data first")
    if not np.isin(labels, (0.0, 1.0)).all():
        raise InputError(f"y must hold only 0 and 1, found {sorted(np.unique(labels))[:10]}")
    if epochs < 1 or batch_size < 1:
        raise InputError(f"epochs and batch_size must be >= 1, got {epochs} and {batch_size}")
    target = torch.as_tensor(labels, dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TargetMLP(d, hidden)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    with one_torch_thread():
        for _ in range(epochs):
            perm = torch.randperm(n, generator=gen)
            for start in range(0, n, batch_size):
                idx = perm[start : start + batch_size]
                opt.zero_grad()
                loss = nn.functional.binary_cross_entropy_with_logits(model(X[idx]), target[idx])
                loss.backward()
                opt.step()
    model.eval()
    return model


def inject_historical_bias(
    df: pd.DataFrame,
    *,
    protected: str = "sex",
    disadvantaged: str = "Female",
    label: str = "income",
    rate: float,
    seed: int,
) -> pd.Series:
    """Labels with injected historical bias: a share of the disadvantaged group's positives set to 0.

    Exactly ``round(rate * m)`` of the ``m`` rows with ``df[protected] == disadvantaged`` and
    ``df[label] == 1`` are chosen uniformly at random without replacement
    (``numpy.random.default_rng(seed)``) and their label is set to 0. Every other row keeps its
    label: no row of another group and no negative label is ever changed.

    Parameters
    ----------
    df : DataFrame
        Holds ``protected`` and ``label`` (0/1). Not modified.
    protected, disadvantaged : str
        Protected column and the level whose favourable labels are suppressed (compared as strings).
    label : str
        Binary label column, 1 = favourable.
    rate : float in [0, 1]
        Share of the disadvantaged group's positives flipped.
    seed : int

    Returns
    -------
    Series of int64, same index and name as ``df[label]``.

    Raises
    ------
    InputError
        Missing columns, a label that is not 0/1, or ``rate`` outside [0, 1].

    Examples
    --------
    >>> train_rows = load_adult(split="train")          # 1,112 women with income 1
    >>> y = inject_historical_bias(train_rows, rate=0.5, seed=0)
    >>> int((train_rows["income"] - y).sum())          # round(0.5 * 1112)
    556
    """
    require_columns(df, [protected, label], what="inject_historical_bias")
    if not (isinstance(rate, (int, float)) and 0.0 <= rate <= 1.0 and not math.isnan(rate)):
        raise InputError(f"rate must be a share in [0, 1], got {rate!r}")
    y = df[label]
    if y.isna().any() or not y.isin([0, 1]).all():
        raise InputError(f"label column '{label}' must hold only 0 and 1, found {sorted(y.dropna().unique())[:10]}")
    out = y.astype("int64").copy()
    group = df[protected].astype(str).to_numpy() == str(disadvantaged)
    positives = np.flatnonzero(group & (out.to_numpy() == 1))
    k = int(round(rate * len(positives)))
    chosen = np.random.default_rng(seed).choice(positives, size=k, replace=False)
    values = out.to_numpy().copy()
    values[chosen] = 0
    return pd.Series(values, index=out.index, name=out.name, dtype="int64")


@dataclass(frozen=True)
class DemoVersion:
    """One demo model version, as a model team would register it.

    Attributes
    ----------
    name : str
        ``"v1"``, ``"v2"``, ...
    description : str
        One sentence: what changed in this version.
    model_path : Path
        TorchScript file (load with :func:`faux_checks.inputs.models.load_model`); output: one logit.
    spec_path : Path
        FeatureSpec JSON that encodes a DataFrame into the model's inputs.
    audit_path : Path
        The audit dataset CSV (shared by all versions; holds ``sex`` and ``income``).
    recipe : dict
        Training recipe: data, labels, bias injection, feature columns, hyper-parameters, seed.
    """

    name: str
    description: str
    model_path: Path
    spec_path: Path
    audit_path: Path
    recipe: dict = field(default_factory=dict)

    @property
    def uses_protected(self) -> bool:
        """Whether the protected attribute is one of the model's input columns."""
        return self.recipe.get("protected", "sex") in self.recipe.get("feature_columns", ())

    def to_dict(self) -> dict:
        """JSON-serialisable dict (paths as strings)."""
        d = asdict(self)
        for key in ("model_path", "spec_path", "audit_path"):
            d[key] = str(d[key])
        return d


def build_demo_versions(
    workdir: str | Path,
    *,
    seed: int = 0,
    bias_rate: float = DEFAULT_BIAS_RATE,
    epochs: int = 20,
) -> list[DemoVersion]:
    """Train and export the demo model versions v1–v4 on UCI Adult (see module docstring).

    Data: :func:`faux_checks.inputs.datasets.load_adult` without missing values. Training rows: UCI's
    adult.data split (30,162 rows). Audit rows: UCI's adult.test split (15,060 rows), never used
    for training, written to ``workdir / AUDIT_FILENAME`` with all columns (``sex`` and ``income``
    included, ``split`` dropped).

    One FeatureSpec is fitted on the training rows over :data:`ADULT_FEATURES` (numeric columns
    standardised, categorical ones one-hot, levels with fewer than 50 training rows grouped into
    ``__infrequent__``: rare native-country levels were measured dominating gradients, docs/method.md), and
    saved as ``adult-spec.json``. v3 and v4 use the same spec with ``sex`` appended as the last
    column (``adult-spec-with-sex.json``), so the first features of both specs coincide and one
    auxiliary model fits all versions.

    Parameters
    ----------
    workdir : str or Path
        Created if missing. Nothing in it is overwritten: existing output files raise InputError.
    seed : int
        Seeds the training of every version and the bias injection.
    bias_rate : float
        Share of women's >50K training labels flipped to 0 in v2 and v4
        (:func:`inject_historical_bias`).
    epochs : int
        Training epochs of every version (Adam, lr 1e-3, batch 512, 2×64 ReLU MLP).

    Returns
    -------
    list of DemoVersion
        In version order. A ``manifest.json`` in ``workdir`` records the same.

    Notes
    -----
    Cost: 4 trainings of 20 epochs on one thread, about 10 s on a loaded 2-core machine.
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    outputs = ["adult-spec.json", "adult-spec-with-sex.json", AUDIT_FILENAME, "manifest.json"] + [
        f"{v}.pt" for v in ("v1", "v2", "v3", "v4")
    ]
    existing = [name for name in outputs if (workdir / name).exists()]
    if existing:
        raise InputError(f"{workdir} already holds {existing}; build_demo_versions never overwrites, use an empty folder")

    data = load_adult(drop_missing=True)
    train = data[data["split"] == "train"].drop(columns="split").reset_index(drop=True)
    audit = data[data["split"] == "test"].drop(columns="split").reset_index(drop=True)
    audit_path = workdir / AUDIT_FILENAME
    audit.to_csv(audit_path, index=False)

    features = list(ADULT_FEATURES)
    with_sex = features + ["sex"]
    spec = FeatureSpec.fit(train, features, min_frequency=MIN_FREQUENCY, name="adult-features")
    spec_sex = FeatureSpec.fit(train, with_sex, min_frequency=MIN_FREQUENCY, name="adult-features-with-sex")
    spec_path = spec.save(workdir / "adult-spec.json")
    spec_sex_path = spec_sex.save(workdir / "adult-spec-with-sex.json")
    X = spec.encode(train)
    X_sex = spec_sex.encode(train)
    y = train["income"]
    y_biased = inject_historical_bias(train, rate=bias_rate, seed=seed)
    n_flipped = int((y - y_biased).sum())

    common = {
        "dataset": "UCI Adult (CC BY 4.0), faux_checks.inputs.datasets.load_adult(drop_missing=True)",
        "train_rows": f"split == 'train' (UCI adult.data), {len(train)} rows",
        "audit_rows": f"split == 'test' (UCI adult.test), {len(audit)} rows, {AUDIT_FILENAME}",
        "protected": "sex",
        "model": "TargetMLP(d, hidden=(64, 64)), output: one logit of P(income > 50K)",
        "epochs": epochs, "lr": 1e-3, "batch_size": 512, "hidden": [64, 64], "seed": seed,
        "min_frequency": MIN_FREQUENCY,
    }
    original = {"labels": "income as recorded (1 = >50K)"}
    biased = {
        "labels": "income with historical bias against women",
        "bias": {
            "function": "faux_checks_app.demo.inject_historical_bias",
            "protected": "sex", "disadvantaged": "Female", "rate": bias_rate, "seed": seed,
            "flipped": n_flipped,
            "rule": "exactly round(rate * m) of the m training rows with sex == Female and income == 1, "
                    "chosen uniformly at random, set to income = 0; no other label changed",
        },
    }
    plan = [
        ("v1", "Income classifier on the recorded labels; sex is not an input.",
         X, y, spec_path, features, original),
        ("v2", f"Retrained on historically biased labels ({bias_rate:.0%} of women's >50K labels recorded "
               "as <=50K); sex is not an input, so the bias can only reach the model through proxies.",
         X, y_biased, spec_path, features, biased),
        ("v3", "Recorded labels, with sex added as an input column.",
         X_sex, y, spec_sex_path, with_sex, original),
        ("v4", f"Historically biased labels ({bias_rate:.0%} of women's >50K labels flipped) and sex as an "
               "input column.",
         X_sex, y_biased, spec_sex_path, with_sex, biased),
    ]
    versions = []
    for name, description, Xv, yv, sp, cols, labels in plan:
        model = train_target(Xv, yv.to_numpy(), epochs=epochs, seed=seed)
        path = save_torchscript(model, workdir / f"{name}.pt")
        recipe = {**common, **labels, "feature_columns": cols, "feature_spec": sp.name}
        versions.append(DemoVersion(name, description, path, sp, audit_path, recipe))
    manifest = {"schema_version": 1, "versions": [v.to_dict() for v in versions], "audit_path": str(audit_path)}
    (workdir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return versions


def protected_direct_term(spec: FeatureSpec, protected: str, groups: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Mask and ∂x/∂c of a binary protected column that is one of the model's inputs.

    Parameters
    ----------
    spec : FeatureSpec
        Holds ``protected`` as a categorical column.
    protected : str
    groups : sequence of 2 str
        Group labels in class-index order (c = 0, c = 1), e.g. ``("Female", "Male")``.

    Returns
    -------
    mask : ndarray of shape (d,), bool
        The encoded features of ``protected``.
    dx_dc : ndarray of shape (d, 1), float64
        Encoded x(c = 1) − x(c = 0): the one-hot difference (−1 at group 0's feature, +1 at
        group 1's), for :class:`faux_checks.FAuxTester`'s ``dx_dc_direct``.
    """
    mask = spec.feature_mask(protected)
    if not mask.any():
        raise InputError(f"column '{protected}' is not an input of FeatureSpec '{spec.name}'")
    if len(groups) != 2:
        raise InputError(f"protected_direct_term handles a binary attribute, got groups {list(groups)}")
    names = spec.feature_names
    dx_dc = np.zeros((spec.n_features, 1), dtype=np.float64)
    for sign, group in ((-1.0, groups[0]), (1.0, groups[1])):
        key = f"{protected}={group}"
        if key not in names:
            raise InputError(f"FeatureSpec '{spec.name}' has no feature '{key}'; its levels: "
                             f"{[n for n in names if n.startswith(protected + '=')]}")
        dx_dc[names.index(key), 0] = sign
    return mask, dx_dc


def measure_demo_versions(
    versions: Sequence[DemoVersion],
    *,
    aux_seed: int = 0,
    deltas: Sequence[float] = (0.01, 0.02, 0.05, 0.1),
    variants: Sequence[str] = ("faux",),
) -> pd.DataFrame:
    """Measure each version with the fAux engine (no policy, no decision): the evidence for a policy.

    For every version: an ``AuxiliaryModel(kind="binary", seed=aux_seed)`` predicts sex from the
    encoded audit features without sex (one aux model, shared: the no-sex features are the same
    in both specs), then ``FAuxTester(model, aux, variant, output=TargetOutput("logit"))`` scores
    the audit rows; for a model with sex as an input, the sex columns are the ``protected_mask``
    and their one-hot difference Female → Male the direct term (:func:`protected_direct_term`).

    Returns
    -------
    DataFrame
        One row per version and variant: aux AUC, accuracy on the recorded audit labels,
        demographic parity difference P(ŷ=1 | Male) − P(ŷ=1 | Female) with ŷ = [p > 0.5],
        LIC score percentiles (p50, p90, p99; overall), undefined count, and the flagged fraction
        at every δ overall, for Female and for Male (columns ``flagged@δ``, ``female@δ``,
        ``male@δ``). Variant ``"ng"`` skips versions with sex as an input (no direct term for a
        cosine).
    """
    from faux_checks import AuxiliaryModel, FAuxTester, TargetOutput, encode_protected
    from faux_checks.inputs.models import load_model

    if not versions:
        raise InputError("no versions to measure")
    audit = pd.read_csv(versions[0].audit_path)
    c = encode_protected(audit["sex"], name="sex", kind="binary")
    female = audit["sex"].to_numpy() == "Female"
    y = audit["income"].to_numpy()
    specs = {p: FeatureSpec.load(p) for p in {v.spec_path for v in versions}}
    base = next((s for s in specs.values() if "sex" not in s.source_columns), None)
    if base is None:
        raise InputError("measure_demo_versions needs at least one version without sex as an input")
    aux = AuxiliaryModel(kind="binary", seed=aux_seed).fit(base.encode(audit), c.values, groups=c.groups)
    rows = []
    for v in versions:
        spec = specs[v.spec_path]
        X = spec.encode(audit)
        model = load_model(v.model_path)
        extra = {}
        if "sex" in spec.source_columns:
            mask, dx_dc = protected_direct_term(spec, "sex", c.groups)
            if not np.array_equal(X[:, ~mask], base.encode(audit)):
                raise InputError(f"{v.name}: its spec's non-sex features differ from the aux model's inputs")
            extra = {"protected_mask": mask, "dx_dc_direct": dx_dc}
        for variant in variants:
            if extra and variant == "ng":
                continue
            res = FAuxTester(model, aux, variant=variant, output=TargetOutput("logit"), **extra).evaluate(X, evidence=False)
            s, p = res.scores, res.probability
            yhat = p > 0.5
            row = {
                "version": v.name, "variant": variant, "aux_seed": aux_seed, "aux_auc": aux.quality_,
                "accuracy": float((yhat == y).mean()),
                "dp_diff": float(yhat[~female].mean() - yhat[female].mean()),
                "undefined": int(res.undefined.sum()),
                "p50": float(np.nanpercentile(s, 50)), "p90": float(np.nanpercentile(s, 90)),
                "p99": float(np.nanpercentile(s, 99)),
            }
            for d in deltas:
                flagged = res.flagged(d)
                row[f"flagged@{d:g}"] = float(flagged.mean())
                row[f"female@{d:g}"] = float(flagged[female].mean())
                row[f"male@{d:g}"] = float(flagged[~female].mean())
            rows.append(row)
    return pd.DataFrame(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m faux_checks_app.demo``: build the versions for each seed and print the measurements."""
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--bias-rate", type=float, default=DEFAULT_BIAS_RATE)
    parser.add_argument("--variants", nargs="+", default=["faux"])
    parser.add_argument("--workdir", type=Path, default=None, help="keep the built versions here (one folder per seed)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for the aux model and scoring")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    tables = []
    with tempfile.TemporaryDirectory() as tmp:
        root = args.workdir or Path(tmp)
        for seed in args.seeds:
            versions = build_demo_versions(root / f"seed{seed}", seed=seed, bias_rate=args.bias_rate)
            table = measure_demo_versions(versions, aux_seed=seed, variants=args.variants)
            table.insert(0, "seed", seed)
            tables.append(table)
    with pd.option_context("display.width", 250, "display.max_columns", 60):
        print(pd.concat(tables, ignore_index=True).round(4).to_string(index=False))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
