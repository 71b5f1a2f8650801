"""Ground-truth cells for the tester benchmark: a target model, an auxiliary model, audit rows and their true IFS.

Three families (docs/benchmark.md, "Set-up"):

- ``fused``: :mod:`faux_checks.groundtruth.fused` (UCI Adult ⊕ Bank Marketing, concat fusion), bias
  0…1; admissible = the c-independent block x̂.
- ``proxy``: :mod:`faux_checks.groundtruth.proxy` on real rows of UCI Adult and the law-school data,
  binary / 3-class / continuous c, label-bias level 0…0.8; admissible = the legitimate block.
- ``adult``: the definitional counterfactual (:mod:`faux_checks.groundtruth.definitional`) of five
  income models on UCI Adult; admissible = every feature but ``relationship`` (the shipped Adult
  policy's declaration).

A :class:`Cell` holds everything a reading needs, in the auxiliary model's input space (``keep``
selects it from the target's features when c's own columns are target inputs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

ADULT_COLS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income",
]
TAU = 0.1
ADULT_VERSIONS = {
    "v1": "recorded labels, sex not an input",
    "v2": "labels biased against women (75% of their >50K labels recorded as <=50K), sex not an input",
    "v3": "recorded labels, sex as an input",
    "v4": "biased labels and sex as an input",
    "v5": "recorded labels, relationship canonicalised (Husband/Wife -> Spouse), sex not an input",
}


@dataclass
class Cell:
    """One benchmark cell (see module docstring)."""

    family: str
    key: dict
    target: nn.Module
    aux: object
    kind: str
    X: np.ndarray                  # (n, d) audit rows as the target sees them, float32
    c: np.ndarray                  # (n,) group index or continuous value
    X_ref: np.ndarray              # (n_ref, d_aux) reference rows in the aux input space
    c_ref: np.ndarray
    truth: np.ndarray              # (n,) IFS, probability points
    admissible: np.ndarray         # (d_aux,) bool: the family's declaration
    keep: np.ndarray               # (d,) bool: target features the aux sees
    groups: list = field(default_factory=list)   # one-hot groups (aux input space)
    direct_levels: np.ndarray | None = None
    dx_dc: np.ndarray | None = None              # fused: true ∂x/∂c (n, d, 1) for LIC-UB
    exact: np.ndarray | None = None              # adult: rows where the truth is exact (married)
    meta: dict = field(default_factory=dict)


class MaskedInputs(nn.Module):
    """A network of some features only, taking the full encoded row (the other features are ignored)."""

    def __init__(self, net, mask):
        super().__init__()
        self.net = net
        self.register_buffer("idx", torch.as_tensor(np.flatnonzero(mask)))

    def forward(self, x):
        return self.net(x[:, self.idx])


def train_mlp(X, y, *, seed, hidden=(64, 64), epochs=20, lr=1e-3, batch_size=512, weight_decay=0.0):
    """An MLP with one logit output trained on (X, y) only; deterministic per seed, one torch thread."""
    gen = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        layers, width = [], X.shape[1]
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        net = nn.Sequential(*layers, nn.Linear(width, 1))
    Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(np.asarray(y), dtype=torch.float32)
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        perm = torch.randperm(len(Xt), generator=gen)
        for start in range(0, len(Xt), batch_size):
            idx = perm[start:start + batch_size]
            opt.zero_grad()
            nn.functional.binary_cross_entropy_with_logits(net(Xt[idx])[:, 0], yt[idx]).backward()
            opt.step()
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return net


def prob(model, X) -> np.ndarray:
    with torch.no_grad():
        return torch.sigmoid(model(torch.as_tensor(np.asarray(X), dtype=torch.float32))[:, 0].double()).numpy()


def one_hot_groups(spec, keep=None) -> list[np.ndarray]:
    """Encoded positions of each categorical column (in the kept feature space)."""
    positions = np.arange(spec.n_features) if keep is None else np.cumsum(keep) - 1
    out, j = [], 0
    for enc in spec.columns:
        idx = np.arange(j, j + enc.width)
        if enc.kind == "categorical" and (keep is None or keep[idx].all()):
            out.append(positions[idx])
        j += enc.width
    return out


# ---------------------------------------------------------------------------- data
class Sources:
    """Real datasets read once from ``shared/data`` (never the network)."""

    def __init__(self, data_dir: Path):
        self.data_dir = Path(data_dir)
        self._cache: dict = {}

    def fused(self):
        if "fused" not in self._cache:
            d = self.data_dir
            adult = pd.read_csv(d / "adult" / "adult.data", header=None, names=ADULT_COLS, skipinitialspace=True,
                                na_values="?")
            x_hat = pd.DataFrame({
                "age": adult["age"], "education_num": adult["education-num"],
                "log_capital_gain": np.log1p(adult["capital-gain"]), "log_capital_loss": np.log1p(adult["capital-loss"]),
                "hours_per_week": adult["hours-per-week"]}).astype(float)
            y_hat = (adult["income"].str.strip() == ">50K").astype(int).to_numpy()
            bank = pd.read_csv(d / "bank_marketing" / "bank-additional-full.csv", sep=";")
            x_tilde = pd.DataFrame({
                "b_age": bank["age"], "log_duration": np.log1p(bank["duration"]), "log_campaign": np.log1p(bank["campaign"]),
                "previous": bank["previous"], "emp_var_rate": bank["emp.var.rate"],
                "cons_price_idx": bank["cons.price.idx"], "cons_conf_idx": bank["cons.conf.idx"],
                "euribor3m": bank["euribor3m"]}).astype(float)
            y_tilde = (bank["y"] == "yes").astype(int).to_numpy()
            self._cache["fused"] = (x_hat, y_hat, x_tilde, y_tilde)
        return self._cache["fused"]

    def legit(self, dataset: str):
        """(legitimate features, real label, the numeric column moved into proxy_legit)."""
        if dataset in self._cache:
            return self._cache[dataset]
        d = self.data_dir
        if dataset == "adult":
            a = pd.read_csv(d / "adult" / "adult.data", header=None, names=ADULT_COLS, skipinitialspace=True,
                            na_values="?")
            b = pd.read_csv(d / "adult" / "adult.test", header=None, names=ADULT_COLS, skipinitialspace=True,
                            na_values="?", skiprows=1)
            frame = pd.concat([a, b], ignore_index=True).dropna().reset_index(drop=True)
            y = frame["income"].str.rstrip(".").eq(">50K").astype(int).to_numpy()
            legit = frame[["age", "workclass", "education-num", "marital-status", "occupation", "relationship", "race",
                           "capital-gain", "capital-loss", "hours-per-week"]].copy()
            legit["capital-gain"] = np.log1p(legit["capital-gain"])
            legit["capital-loss"] = np.log1p(legit["capital-loss"])
            out = (legit, y, "hours-per-week")
        elif dataset == "law":
            frame = pd.read_csv(d / "law_school" / "law_data.csv", index_col=0)
            frame = frame[frame["region_first"] != "PO"].reset_index(drop=True)          # one row
            y = (frame["ZFYA"] > frame["ZFYA"].median()).astype(int).to_numpy()
            out = (frame[["LSAT", "UGPA", "region_first"]].copy(), y, "UGPA")
        elif dataset == "credit":      # held out: the independent check only (benchmark_notes.md), never tuned on
            frame = pd.read_csv(d / "default_credit_card" / "UCI_Credit_Card.csv")
            y = frame["Y"].astype(int).to_numpy()
            legit = pd.DataFrame({
                "log_limit_bal": np.log(frame["X1"].astype(float)),
                "education": frame["X3"].astype(str), "marriage": frame["X4"].astype(str),
                "age": frame["X5"].astype(float), "pay_0": frame["X6"].astype(float), "pay_2": frame["X7"].astype(float),
                "log_bill_amt1": np.log1p(frame["X12"].clip(lower=0).astype(float)),
                "log_pay_amt1": np.log1p(frame["X18"].astype(float)), "log_pay_amt2": np.log1p(frame["X19"].astype(float))})
            out = (legit, y, "age")
        else:
            raise ValueError(f"unknown proxy dataset {dataset!r}")
        self._cache[dataset] = out
        return out

    def base(self, dataset: str):
        """(real rows for the mechanisms family, real label, real continuous outcome or None)."""
        key = f"base:{dataset}"
        if key in self._cache:
            return self._cache[key]
        d = self.data_dir
        if dataset == "bank":
            bank = pd.read_csv(d / "bank_marketing" / "bank-additional-full.csv", sep=";")
            y = (bank["y"] == "yes").astype(int).to_numpy()
            frame = pd.DataFrame({
                "age": bank["age"].astype(float), "job": bank["job"], "marital": bank["marital"],
                "education": bank["education"], "housing": bank["housing"], "contact": bank["contact"],
                "log_duration": np.log1p(bank["duration"].astype(float)),
                "log_campaign": np.log1p(bank["campaign"].astype(float)), "previous": bank["previous"].astype(float),
                "poutcome": bank["poutcome"], "euribor3m": bank["euribor3m"].astype(float),
                "cons_conf_idx": bank["cons.conf.idx"].astype(float)})
            out = (frame, y, None)
        elif dataset == "law":
            law = pd.read_csv(d / "law_school" / "law_data.csv", index_col=0)
            law = law[law["region_first"] != "PO"].reset_index(drop=True)
            y = (law["ZFYA"] > law["ZFYA"].median()).astype(int).to_numpy()
            frame = law[["LSAT", "UGPA", "region_first"]].copy()
            frame["LSAT"] = frame["LSAT"].astype(float)
            out = (frame, y, law["ZFYA"].to_numpy(dtype=np.float64))
        elif dataset == "compas":
            cp = pd.read_csv(d / "compas" / "compas-scores-two-years.csv")
            cp = cp[(cp["days_b_screening_arrest"].abs() <= 30) & (cp["c_charge_degree"] != "O")].reset_index(drop=True)
            y = (1 - cp["two_year_recid"]).astype(int).to_numpy()             # favourable: no recidivism
            frame = pd.DataFrame({"age": cp["age"].astype(float), "priors_count": cp["priors_count"].astype(float),
                                  "juv_fel_count": cp["juv_fel_count"].astype(float),
                                  "c_charge_degree": cp["c_charge_degree"].astype(str), "age_cat": cp["age_cat"]})
            out = (frame, y, None)
        else:
            raise ValueError(f"unknown mechanism dataset {dataset!r}")
        self._cache[key] = out
        return out

    def adult_split(self):
        if "adult_split" not in self._cache:
            from faux_checks.inputs.datasets import load_adult

            data = load_adult(drop_missing=True)
            self._cache["adult_split"] = (data[data["split"] == "train"].drop(columns="split").reset_index(drop=True),
                                          data[data["split"] == "test"].drop(columns="split").reset_index(drop=True))
        return self._cache["adult_split"]


# ---------------------------------------------------------------------------- families
def fused_cell(sources: Sources, *, bias: float, seed: int, n_train: int = 8000, n_audit: int = 4000) -> Cell:
    from faux_checks import AuxiliaryModel
    from faux_checks.groundtruth.fused import make_fused_data
    from faux_checks.method.output import TargetOutput, predict_probability

    train = make_fused_data(*sources.fused(), n=n_train, bias=bias, fusion="concat", seed=1000 * seed + 1)
    audit = make_fused_data(*sources.fused(), n=n_audit, bias=bias, fusion="concat", seed=1000 * seed + 2)
    target = train_mlp(train.X, train.y, seed=seed, hidden=(32, 32), lr=3e-3, batch_size=128, weight_decay=1e-3)
    aux = AuxiliaryModel(kind="binary", seed=seed).fit(train.X, train.c)
    logit = TargetOutput("logit")
    truth = np.abs(predict_probability(target, audit.X, logit) - predict_probability(target, audit.swapped(), logit))
    d = audit.X.shape[1]
    admissible = np.zeros(d, dtype=bool)
    admissible[: audit.x_hat.shape[1]] = True
    return Cell("fused", {"bias": bias}, target, aux, "binary", audit.X, audit.c, train.X, train.c, truth,
                admissible, np.ones(d, dtype=bool), dx_dc=audit.dx_dc(), meta={"aux_auc": aux.quality_})


def proxy_cell(sources: Sources, *, dataset: str, kind: str, bias: float, seed: int, n_train: int = 10_000,
               n_audit: int = 4000) -> Cell:
    from faux_checks import AuxiliaryModel, FeatureSpec
    from faux_checks.groundtruth.proxy import PROXY_COLUMNS, make_proxy_data, proxy_fairness_scores

    legit, y, legit_column = sources.legit(dataset)
    rows = np.random.default_rng(seed).choice(len(legit), min(len(legit), n_train + n_audit), replace=False)
    data = make_proxy_data(legit.iloc[rows], y[rows], legit_column=legit_column, kind=kind, bias=bias, seed=seed)
    train, audit = data.subset(np.arange(n_train)), data.subset(np.arange(n_train, len(rows)))
    frame = train.frame()
    spec = FeatureSpec.fit(frame, list(frame.columns), min_frequency=50)
    X_train, X_audit = spec.encode(frame), spec.encode(audit.frame())
    target = train_mlp(X_train, train.y, seed=seed)
    aux = AuxiliaryModel(kind=kind, seed=seed).fit(X_train, train.c)
    truth = proxy_fairness_scores(lambda f: prob(target, spec.encode(f)), audit)
    proxy_features = np.isin(spec.feature_to_column(), [spec.source_columns.index(p) for p in PROXY_COLUMNS])
    return Cell("proxy", {"dataset": dataset, "kind": kind, "bias": bias}, target, aux, kind, X_audit, audit.c,
                X_train, train.c, truth, ~proxy_features, np.ones(spec.n_features, dtype=bool),
                groups=one_hot_groups(spec), meta={"aux_quality": aux.quality_})


def adult_cell(sources: Sources, *, version: str, seed: int, n_audit: int = 5000, bias_rate: float = 0.75) -> Cell:
    from faux_checks import AuxiliaryModel, FeatureSpec
    from faux_checks.groundtruth.definitional import definitional_counterfactual, linked_rows
    from faux_checks.groundtruth.labels import inject_historical_bias
    from faux_checks.inputs.datasets import ADULT_FEATURES

    train, audit = sources.adult_split()
    audit = audit.sample(n_audit, random_state=seed).reset_index(drop=True)
    train, audit_in = train.copy(), audit.copy()
    if version == "v5":
        for f in (train, audit_in):
            f["relationship"] = f["relationship"].replace({"Husband": "Spouse", "Wife": "Spouse"})
    columns = list(ADULT_FEATURES) + (["sex"] if version in ("v3", "v4") else [])
    spec = FeatureSpec.fit(train, columns, min_frequency=50)
    y = train["income"].to_numpy()
    if version in ("v2", "v4"):
        y = inject_historical_bias(train, rate=bias_rate, seed=seed).to_numpy()
    X_train = spec.encode(train)
    target = train_mlp(X_train, y, seed=seed)
    mask = spec.feature_mask("sex")
    keep = ~mask
    c_train = (train["sex"] == "Male").to_numpy().astype(np.int64)
    c_audit = (audit_in["sex"] == "Male").to_numpy().astype(np.int64)
    aux = AuxiliaryModel(kind="binary", seed=seed).fit(X_train[:, keep], c_train)
    X_audit = spec.encode(audit_in)
    counterfactual = definitional_counterfactual(audit_in)
    truth = np.abs(prob(target, spec.encode(counterfactual)) - prob(target, X_audit))
    names = np.asarray(spec.feature_names)[keep]
    admissible = ~np.char.startswith(names.astype(str), "relationship=")
    direct_levels = None
    if mask.any():
        levels = [spec.feature_names.index(f"sex={g}") for g in ("Female", "Male")]
        cols = np.flatnonzero(mask)
        direct_levels = np.array([[1.0 if col == levels[g] else 0.0 for col in cols] for g in (0, 1)])
    return Cell("adult", {"version": version}, target, aux, "binary", X_audit, c_audit, X_train[:, keep], c_train,
                truth, admissible, keep, groups=one_hot_groups(spec, keep), direct_levels=direct_levels,
                exact=linked_rows(audit), meta={"aux_auc": aux.quality_, "description": ADULT_VERSIONS[version]})


#: Per (dataset, mechanism): the real column the mechanism builds on and the subgroup (see mechanisms.py).
MECHANISM_COLUMNS = {
    ("bank", "ratio"): {"column": "log_duration"}, ("bank", "redraw"): {"column": "job"},
    ("bank", "mediator"): {"column": "log_duration"}, ("bank", "subgroup"): {"subgroup": ("marital", "married")},
    ("bank", "names"): {"column": "marital"}, ("law", "ratio"): {"column": "LSAT"},
    ("law", "redraw"): {"column": "region_first"}, ("law", "mediator"): {"column": "LSAT"},
    ("compas", "names"): {"column": "age_cat"}, ("compas", "ratio"): {"column": "priors_count"},
}


def mechanism_cell(sources: Sources, *, dataset: str, mechanism: str, kind: str, bias: float, seed: int,
                   target: str = "all", n_train: int = 10_000, n_audit: int = 4000) -> Cell:
    """A cell of the mechanisms family (:mod:`faux_checks.groundtruth.mechanisms`).

    ``target = "all"``: the target sees every column; ``"mediator_only"``: the target and the aux model see the
    real block and the admissible mediator only (no proxy), so the truth is 0 everywhere. Law-school rows take
    the threshold label bias on ZFYA, the others label flips.
    """
    from faux_checks import AuxiliaryModel, FeatureSpec
    from faux_checks.groundtruth.mechanisms import make_mechanism_data, mechanism_fairness_scores

    base, y, outcome = sources.base(dataset)
    n_total = min(len(base), n_train + n_audit)
    if n_total < n_train + n_audit:
        n_train = int(n_total * 0.7)
    rows = np.random.default_rng(seed).choice(len(base), n_total, replace=False)
    data = make_mechanism_data(base.iloc[rows], y[rows], mechanism=mechanism, kind=kind, bias=bias, seed=seed,
                               label_bias="threshold" if outcome is not None else "flip",
                               outcome=None if outcome is None else outcome[rows],
                               **MECHANISM_COLUMNS.get((dataset, mechanism), {}))
    train, audit = data.subset(np.arange(n_train)), data.subset(np.arange(n_train, n_total))
    frame = train.frame()
    columns = list(frame.columns)
    if target == "mediator_only":
        columns = [c for c in columns if c in data.admissible]
    spec = FeatureSpec.fit(frame, columns, min_frequency=50)
    X_train, X_audit = spec.encode(frame), spec.encode(audit.frame())
    if target == "legit_only":            # the fair control: a model of the real block only, blind to every caused column
        real = np.isin(spec.feature_to_column(), [spec.source_columns.index(c) for c in base.columns
                                                   if c in spec.source_columns])
        net = MaskedInputs(train_mlp(X_train[:, real], train.y, seed=seed), real)
    else:
        net = train_mlp(X_train, train.y, seed=seed)
    aux = AuxiliaryModel(kind=kind, seed=seed).fit(X_train, train.c)
    truth = mechanism_fairness_scores(lambda f: prob(net, spec.encode(f)), audit)
    declared = ["mediator"] if mechanism == "mediator" else data.admissible   # the mediator alone: the rest is for the hold
    admissible_cols = [spec.source_columns.index(c) for c in declared if c in spec.source_columns]
    admissible = np.isin(spec.feature_to_column(), admissible_cols)
    key = {"dataset": dataset, "mechanism": mechanism, "kind": kind, "bias": bias}
    if target != "all":
        key["target"] = target
    return Cell("mechanism", key, net, aux, kind, X_audit, audit.c, X_train, train.c, truth, admissible,
                np.ones(spec.n_features, dtype=bool), groups=one_hot_groups(spec),
                meta={"aux_quality": aux.quality_, "spec": spec, "links": data.links})
