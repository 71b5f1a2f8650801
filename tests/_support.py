"""Shared inputs of the reliability tests: small audit data, TorchScript models, policies, and the
bad-input cases of ../shared/cases/bad-inputs.md as file bundles that the CLI, the Great
Expectations suite and the Prefect flow can all read.

Data: ``f0..f3`` independent of ``sex``, ``proxy`` = 2·[sex = M] + N(0, 0.5²). The fair target
uses f0, f1 only (LIC ≈ 0: passes), the unfair one leans on the proxy (fails).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import nn

FEATURES = ["f0", "f1", "f2", "f3", "proxy"]
FAIR = [1.0, 0.5, 0.0, 0.0, 0.0]
UNFAIR = [1.0, 0.0, 0.0, 0.0, 2.0]
POLICY = ('protected = "sex"\nlabel = "y"\nmin_aux_quality = 0.7\n'
          '[faux]\ndelta = 0.05\nmax_flagged_fraction = 0.1\n[aux]\nepochs = 30\n'
          '[decision]\nmin_group_rows = 20\naux_seeds = 1\n')
# 400-row test data: ~40 held-out rows per group. One aux seed: the tests that read the seeds' spread
# set aux_seeds themselves (test_decision.py); the policy default of 3 stays tested there.


def make_data(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n)
    z = rng.normal(size=(n, 4))
    df = pd.DataFrame(z, columns=FEATURES[:4])
    df["proxy"] = (sex == "M") * 2.0 + rng.normal(scale=0.5, size=n)
    df["sex"] = sex
    df["y"] = (z[:, 0] > 0).astype(int)
    return df


def sex_proxy_frame(n: int, seed: int) -> pd.DataFrame:
    """x1, x2 independent of sex; x3 = 2·[sex = M] − 1 + noise (a proxy); y from x1 and sex (the GX tests' data)."""
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n)
    male = (sex == "M").astype(float)
    df = pd.DataFrame({"x1": rng.normal(size=n), "x2": rng.normal(size=n),
                       "x3": 2 * male - 1 + rng.normal(scale=0.5, size=n), "sex": sex})
    df["y"] = ((df.x1 + male + rng.normal(scale=0.5, size=n)) > 0.5).astype(int)
    return df


def linear(weights, bias: float = 0.0) -> nn.Linear:
    lin = nn.Linear(len(weights), 1)
    with torch.no_grad():
        lin.weight[:] = torch.tensor([weights], dtype=torch.float32)
        lin.bias[:] = bias
    return lin


class ProxyWhere(nn.Module):
    """logit = f0 + 2·proxy·[s·f1 > t]: the proxy (hence sex) is read only for one slice of f1 (who is harmed)."""

    def __init__(self, sign: float, threshold: float):
        super().__init__()
        self.sign, self.threshold = sign, threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        on = (x[:, 1] * self.sign > self.threshold).to(x.dtype)
        return (x[:, 0] + 2.0 * x[:, 4] * on).unsqueeze(1)


def write_policy(path: Path, extra: str = "", **top: str) -> Path:
    """The small test policy; ``top`` replaces top-level lines (values as TOML text), ``extra`` is appended."""
    lines = POLICY.splitlines()
    for key, value in top.items():
        lines = [ln for ln in lines if not ln.startswith(f"{key} =")]
        lines.insert(0, f"{key} = {value}")
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class RunsCodeWhenUnpickled:
    """Unpickling this object creates ``marker`` (the code a malicious model file would run)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "code from the model file ran"))


# ---------------------------------------------------------------------------- bad-input cases
@dataclass
class Case:
    """One bad input as files, and what every entry point must conclude from it.

    ``decision`` is the expected outcome; ``reason`` a substring of one of the reasons;
    ``n_missing_protected`` / ``n_undefined`` / ``uses_protected`` are checked when not None.
    """

    id: str
    data: Path
    model: Path
    policy: Path
    decision: str
    reason: str
    spec: Path | None = None
    aux: Path | None = None
    protected: str = "sex"
    n_missing_protected: int | None = None
    n_undefined: int | None = None
    uses_protected: bool | None = None
    notes: dict = field(default_factory=dict)


class _DeadBelow(nn.Module):
    """Given aux model: logit = 4·relu(proxy − 1) − 2, flat (zero gradient) where proxy < 1 (C05)."""

    def forward(self, x):
        return 4.0 * torch.relu(x[:, 4:5] - 1.0) - 2.0


class _TrainModeTarget(nn.Module):
    """BatchNorm + Dropout target saved in train mode (C06); ignores the proxy (fair)."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(5)
        self.hidden = nn.Linear(5, 8)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(8, 1)
        with torch.no_grad():
            self.hidden.weight[:, 4] = 0.0          # blind to the proxy
            self.bn.running_mean[:] = 0.0
            self.bn.running_var[:] = 1.0

    def forward(self, x):
        return self.out(self.drop(torch.tanh(self.hidden(self.bn(x)))))


class _Forms(nn.Module):
    """One classifier h(x) = UNFAIR·x exposed as a logit, a sigmoid probability or a 2-column softmax (C07)."""

    def __init__(self, form: str):
        super().__init__()
        self.form = form
        self.lin = linear(UNFAIR)

    def forward(self, x):
        z = self.lin(x)
        if self.form == "probability":
            return torch.sigmoid(z)
        if self.form == "softmax":
            return torch.softmax(torch.cat([torch.zeros_like(z), z], dim=1), dim=1)
        return z


def build_cases(d: Path) -> dict[str, Case]:
    """Write every bad-input case's files under ``d`` (~1 s) and return them by id."""
    from faux_checks.inputs.models import save_torchscript
    from faux_checks.inputs.tabular import FeatureSpec

    d.mkdir(parents=True, exist_ok=True)
    base = make_data(400)
    fair = save_torchscript(linear(FAIR), d / "fair.pt")
    policy = write_policy(d / "policy.toml")
    drop_policy = write_policy(d / "policy-drop.toml", missing_protected='"drop"')
    base.to_csv(d / "data.csv", index=False)
    cases: dict[str, Case] = {}

    def add(case: Case) -> None:
        cases[case.id] = case

    # C01: 6 missing protected values, the documented 'drop' policy: decided, 6 dropped everywhere
    c01 = base.copy()
    c01.loc[c01.index[:6], "sex"] = None
    c01.to_csv(d / "c01.csv", index=False)
    add(Case("C01-drop", d / "c01.csv", fair, drop_policy, "passed", "6 rows with a missing protected value were not audited",
             n_missing_protected=6))
    # C02: nullable Int64 protected {0, 1, NA} (Parquet keeps the dtype); boolean with NA
    c02 = base.assign(sex=pd.array(np.where(base["sex"] == "M", 1, 0), dtype="Int64"))
    c02.loc[c02.index[:5], "sex"] = pd.NA
    c02.to_parquet(d / "c02-int64.parquet")
    add(Case("C02-Int64-drop", d / "c02-int64.parquet", fair, drop_policy, "passed",
             "5 rows with a missing protected value were not audited", n_missing_protected=5))
    c02b = base.assign(sex=pd.array(base["sex"] == "M", dtype="boolean"))
    c02b.loc[c02b.index[:7], "sex"] = pd.NA
    c02b.to_parquet(d / "c02-boolean.parquet")
    add(Case("C02-boolean-error", d / "c02-boolean.parquet", fair, policy, "undecided",
             "'sex' has 7 missing values in 400 rows"))
    # C03: a feature the model needs is absent
    base.drop(columns=["f3"]).to_csv(d / "c03.csv", index=False)
    add(Case("C03-feature", d / "c03.csv", fair, policy, "undecided", "4 encoded features"))
    # C04: an entirely empty feature column; a constant one; strings and integers mixed in one column
    base.assign(f3=np.nan).to_csv(d / "c04-empty.csv", index=False)
    add(Case("C04-empty", d / "c04-empty.csv", fair, policy, "undecided", "'f3' is entirely empty (400 rows)"))
    base.assign(f3=1.0).to_csv(d / "c04-constant.csv", index=False)
    add(Case("C04-constant", d / "c04-constant.csv", fair, policy, "passed", "flagged fraction", n_undefined=0))
    mixed = base.assign(f3=["a", 1] * 200)
    mixed.to_csv(d / "c04-mixed.csv", index=False)
    spec = FeatureSpec.fit(mixed, FEATURES, name="mixed").save(d / "c04-mixed-spec.json")
    width = FeatureSpec.load(spec).n_features
    mixed_model = save_torchscript(linear([1.0, 0.5] + [0.0] * (width - 2)), d / "c04-mixed.pt")
    add(Case("C04-mixed", d / "c04-mixed.csv", mixed_model, policy, "passed", "flagged fraction", spec=spec))
    # C05: given aux model with an exactly zero gradient for every row with proxy < 1, read by the auxiliary model's
    # move (swap_metric "between"; the default matched move does not use the aux gradient)
    aux = d / "c05-aux.pt"
    torch.jit.save(torch.jit.script(_DeadBelow()), str(aux))
    aux_policy = d / "policy-aux-move.toml"
    aux_policy.write_text(POLICY.replace("[faux]\n", '[faux]\nswap_metric = "between"\n'))
    add(Case("C05-dead-aux", d / "data.csv", fair, aux_policy, "undecided", "LIC scores are undefined",
             aux=aux, n_undefined=int((base["proxy"] < 1.0).sum())))
    # C06: BatchNorm + Dropout target saved in train mode
    target = _TrainModeTarget().train()
    c06 = save_torchscript(target, d / "c06-train-mode.pt")
    add(Case("C06-train-mode", d / "data.csv", c06, policy, "passed", "flagged fraction", n_undefined=0))
    # C07: the same unfair classifier in three declared output forms, and an ambiguous sigmoid output
    for form in ("logit", "probability", "softmax"):
        model = save_torchscript(_Forms(form), d / f"c07-{form}.pt")
        add(Case(f"C07-{form}", d / "data.csv", model, write_policy(d / f"policy-{form}.toml",
                                                                    target_output=f'"{form}"'),
                 "failed", "flagged fraction"))
    add(Case("C07-ambiguous", d / "data.csv", cases["C07-probability"].model, policy, "undecided", "could be a probability or a logit"))
    # C08: the protected attribute as strings, booleans, 0/1 integers and a Categorical (Parquet)
    male = base["sex"] == "M"
    encodings = {"strings": base, "booleans": base.assign(sex=male), "ints": base.assign(sex=male.astype(int))}
    for name, frame in encodings.items():
        frame.to_csv(d / f"c08-{name}.csv", index=False)
        add(Case(f"C08-{name}", d / f"c08-{name}.csv", save_torchscript(linear(UNFAIR), d / f"c08-{name}.pt"),
                 policy, "failed", "flagged fraction"))
    base.assign(sex=pd.Categorical(base["sex"], categories=["F", "M"])).to_parquet(d / "c08-categorical.parquet")
    add(Case("C08-categorical", d / "c08-categorical.parquet", save_torchscript(linear(UNFAIR), d / "c08-cat.pt"),
             policy, "failed", "flagged fraction"))
    # C09: the protected column is one of the target's inputs
    spec9 = FeatureSpec.fit(base, FEATURES + ["sex"], name="with-sex").save(d / "c09-spec.json")
    width9 = FeatureSpec.load(spec9).n_features
    c09 = save_torchscript(linear([1.0, 0.5, 0.0, 0.0, 0.0] + [-1.0, 1.0][: width9 - 5]), d / "c09.pt")
    add(Case("C09-direct", d / "data.csv", c09, policy, "failed", "takes the protected attribute 'sex' as an input",
             spec=spec9, uses_protected=True))
    # C10: a model file that is a pickle which would write a file when unpickled
    evil = d / "c10-evil.pt"
    torch.save({"model": RunsCodeWhenUnpickled(d / "c10-pwned")}, evil)
    add(Case("C10-pickle", d / "data.csv", evil, policy, "undecided", "refused to load",
             notes={"marker": d / "c10-pwned"}))
    return cases


def sensitive_model() -> torch.nn.Module:
    """The audit tests' target: logit = 20·f0 + 4·(proxy − 1) on (f0, f1, f2, f3, proxy); flagged on the
    protected attribute behind ``proxy`` only where |logit| is small (σ' large); f1–f3 unused."""
    lin = torch.nn.Linear(5, 1)
    with torch.no_grad():
        lin.weight[:] = torch.tensor([[20.0, 0.0, 0.0, 0.0, 4.0]])
        lin.bias.fill_(-4.0)
    return lin


#: The fast gate policy of the operations tests (3 aux epochs, one seed, a loose 50% limit).
FAST_GATE_POLICY = ('protected = "sex"\nmin_aux_quality = 0.6\n[faux]\ndelta = 0.1\nmax_flagged_fraction = 0.5\n'
                    '[aux]\nepochs = 3\n[decision]\nmin_group_rows = 20\naux_seeds = 1\n')


def write_proxy_audit(folder: Path, n: int = 600) -> None:
    """``folder/audit.csv`` (f0, f1, a proxy of sex, sex; seed 0) and ``folder/policy.toml`` (FAST_GATE_POLICY)."""
    rng = np.random.default_rng(0)
    sex = rng.choice(["F", "M"], n)
    df = pd.DataFrame({"f0": rng.normal(size=n), "f1": rng.normal(size=n)})
    df["proxy"] = (sex == "M") * 2.0 + rng.normal(scale=0.5, size=n)
    df["sex"] = sex
    df.to_csv(folder / "audit.csv", index=False)
    (folder / "policy.toml").write_text(FAST_GATE_POLICY)


class FirstInputs(nn.Module):
    """A target that reads its first ``k`` inputs and ignores any after them (so a shifted matrix still runs)."""

    def __init__(self, weights):
        super().__init__()
        self.k = len(weights)
        self.lin = linear(weights)

    def forward(self, x):
        return self.lin(x[:, : self.k])


# ------------------------------------------------------------------ MLflow sqlite registries from one migrated copy
def sqlite_backup(source: str, target: str) -> None:
    """Every page of the SQLite file ``source`` written into ``target`` (SQLite's backup API: consistent while
    ``source`` is in use; ``target`` is created or overwritten in place)."""
    import sqlite3

    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def copy_migrated_schema(initialize, template: str):
    """MLflow's ``_initialize_tables`` for an empty sqlite file: the tables of ``template``, migrated once.

    A fresh sqlite registry runs MLflow's create_all and every alembic migration (~1.2 s of CPU each; 10-24 s
    of wall time on a loaded 2-core machine), and most registry tests create one. The template is migrated by
    ``initialize`` itself (MLflow's own function) in an empty file on first use, and SQLite's backup API copies
    its pages whole into the new file: the same tables, indexes and alembic revision. ``_initialize_tables``
    writes no rows (the tracking store then writes the Default experiment with the registry's own artifact
    root): tests/registry/test_registry.py compares the two. Any other database, or a file that already has
    tables, goes through ``initialize``.
    """
    import os

    import sqlalchemy

    def initialize_tables(engine):
        path = engine.url.database
        if engine.url.get_backend_name() != "sqlite" or not path or path == ":memory:" or \
                sqlalchemy.inspect(engine).get_table_names():
            return initialize(engine)
        if not os.path.exists(template):
            scratch = f"{template}.{os.getpid()}.tmp"
            fresh = sqlalchemy.create_engine(f"sqlite:///{scratch}")
            try:
                initialize(fresh)
            finally:
                fresh.dispose()
            os.replace(scratch, template)
        sqlite_backup(template, path)
        return None

    initialize_tables.migrated_from = initialize
    return initialize_tables


def use_migrated_copies(folder: str) -> None:
    """MLflow's stores in this process create a new sqlite registry from one migrated copy kept in ``folder``
    (:func:`copy_migrated_schema`); a second call changes nothing."""
    import mlflow.store.db.utils as utils
    import mlflow.store.model_registry.sqlalchemy_store as registry_store

    if getattr(utils._initialize_tables, "migrated_from", None) is None:
        utils._initialize_tables = copy_migrated_schema(utils._initialize_tables,
                                                        str(Path(folder) / "mlflow-migrated.db"))
    registry_store._initialize_tables = utils._initialize_tables
