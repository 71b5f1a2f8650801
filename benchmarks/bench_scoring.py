"""Throughput and memory benchmark of fAux scoring (FAuxTester.evaluate) at n = 1,000,000.

Set-up of the fAux cases (all random, no training, so the numbers measure the scorer and not a data set):

- X: n x d float32 standard normal (d = 100), one tensor (1M x 100 float32 = 400 MB, counted
  in every peak RSS below).
- target: ``Sequential(Linear(d,64), ReLU, Linear(64,64), ReLU, Linear(64,1))`` with torch's
  default random init, declared as output form ``"logit"`` (tested class 1).
- aux: an untrained :class:`faux_checks.method.auxiliary.AuxNet` with hidden (64, 64), mean 0 and
  scale 1, wrapped with ``AuxiliaryModel.from_module`` (no training): binary c (1 raw logit,
  k = 1 Jacobian row) and 3-class c (3 raw logits, k = 2 Jacobian rows: log-odds vs group 0).

Measured, each case in a fresh worker process so that ``ru_maxrss`` is the peak of that case
alone (``ru_maxrss`` is the *process* peak: torch itself, X, models, the scorer's temporaries
and its output arrays):

- floor: the autograd floor over the same rows and chunk size, float32, batch-sum trick: one
  forward + one backward of the target logit plus one forward + k backwards of the aux outputs
  per chunk; nothing is kept (pure compute).
- swap floor (swap cases): what the swap reading cannot avoid, per chunk: the target's forward at x,
  one aux forward and, per other group, one aux backward, the metric product M·a and the target's
  forward at x′ (``swap_floor_pass``); reported as ``ratio_to_swap_floor`` beside ``ratio_to_floor``.
- swap (the gate's default reading): ``FAuxTester(..., variant="swap").evaluate(X, c, evidence=False)``
  on all n rows of :func:`carried_rows` (c drawn first, every feature's mean moved by c, so every
  feature is free in the shipped reading: metric ``"matched"``, features independent of c held), with
  an auxiliary model trained on the first 20,000 rows (:func:`build_swap`) and its reference fitted once
  on them before the timing; ``free=`` in every line says how many features move. The informativeness
  test (``--informativeness``, 10,000 held-out rows) can only hold features and costs O(d) aux passes; it
  is off by default. Aux training and reference fitting are fixed costs per check (``aux_fit_s``,
  ``reference_s``), not per-row ones.
- faux / ng: ``FAuxTester(..., variant=...).evaluate(X, evidence=False)`` on all n rows.
- ig: ``variant="ig"`` (32 steps, captum) on the first ``--ig-n`` rows (reported as rows/s).
- faux-binary-evidence: binary fAux with ``evidence=True`` (adds the (n, d) float32 evidence).
- whatif-*: NOT the library: :func:`whatif_evaluate`, the same computation with the changes
  proposed in the profile (for evidence of what they would give).
- naive: a per-individual loop, ``torch.autograd.functional.jacobian`` of the target
  probability and of the aux outputs for one row at a time plus ``g @ pinv(J)``, on
  ``--naive-n`` rows, extrapolated per row (faux cases only).
- profile (``--profile``): the stages of ``FAuxTester.evaluate`` re-run one by one with the
  library's own functions, timed (wall and CPU) with the peak-RSS rise of each, plus the LIC
  step's internal operations and alternatives, and the floor's parts and chunk sizes.

Floor and case runs are interleaved (floor, case, floor, case, ...), ``--repeats`` times
(default 2); the best of each is kept. Wall and CPU time (``time.process_time``) are both
recorded: on a shared machine, other processes stretch wall time.

Every result is printed as a line ``case= free= rows= d= device= ratio_to_floor= ratio_to_floor_cpu= rows_per_s=
peak_rss_mb=``; the last line printed is that of binary-c swap (the default reading, evidence=False), or of the
first case run where it is not among ``--cases``.

``--device cuda`` (or ``auto``) scores the swap cases on that device (``FAuxTester(device=...)``: the chunks move
there from the CPU tensor X, so the transfer is timed); their floors run there too, on X copied there once; other
variants stay on the CPU. The last line is the same.

``--compare-with CHECKOUT`` runs every case a second time, in its own worker, with the ``faux_checks``
package of another checkout (rows ``case@CHECKOUT``): before and after a change in one run.

Run: ``python benchmarks/bench_scoring.py`` (15-60 minutes on 2 busy CPU cores at n = 1M);
``--n 100000`` for a quick run. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import subprocess
import sys
import time

# run from a checkout without installing: the repository root holds the faux_checks package; a worker
# started for --compare-with imports the library from that other checkout instead (same bench code)
_LIBRARY = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--library=")), None)
sys.path.insert(0, _LIBRARY or os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

D = 100
HIDDEN = (64, 64)
GOAL_RATIO = 1.5
SELECTION_RATIO = 3.0   # rule (v) of the reading's selection (docs/benchmark.md)
GOAL_ROWS_PER_S = 200_000
GOAL_RSS_MB = 2048

CASES = (
    "swap-binary",
    "swap-3class",
    "swap-continuous",
    "faux-binary",
    "faux-3class",
    "ng-binary",
    "ng-3class",
    "ig-binary",
    "ig-3class",
    "faux-binary-evidence",
    "whatif-binary",
    "whatif-3class",
)


# ---------------------------------------------------------------------------- helpers
def peak_rss_mb() -> float:
    """Process peak resident set size in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def timed(fn):
    """(wall s, CPU s of all this process's threads, fn's output)."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def synced(out, device):
    """``out``, after waiting for the device's queued work (CUDA kernels run asynchronously)."""
    if device.type == "cuda":
        import torch

        torch.cuda.synchronize(device)
    return out


def best_of(fn, repeats: int):
    """(best wall s, best CPU s, last output) over ``repeats`` calls."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        w, c, out = timed(fn)
        walls.append(w)
        cpus.append(c)
    return min(walls), min(cpus), out


def build(n: int, c_kind: str, seed: int = 0, d: int = D):
    """X (n, d) float32 standard normal, a random-init target and an untrained aux network (the fAux cases)."""
    import torch

    from faux_checks.method.auxiliary import AuxiliaryModel, AuxNet

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=gen, dtype=torch.float32)
    target = _target(d)
    m = 3 if c_kind == "3class" else 1
    net = AuxNet(d, m, HIDDEN, torch.zeros(d), torch.ones(d))
    for p in net.parameters():
        p.requires_grad_(False)
    kind = {"binary": "binary", "3class": "multiclass", "continuous": "continuous"}[c_kind]
    aux = AuxiliaryModel.from_module(net, kind=kind, n_features=d)
    return X, target, aux


def _target(d: int):
    """``Sequential(Linear(d,64), ReLU, Linear(64,64), ReLU, Linear(64,1))``, torch's random init, eval mode."""
    from torch import nn

    target = nn.Sequential(
        nn.Linear(d, HIDDEN[0]), nn.ReLU(), nn.Linear(HIDDEN[0], HIDDEN[1]), nn.ReLU(), nn.Linear(HIDDEN[1], 1)
    )
    return target.eval()


def carried_rows(n: int, c_kind: str, seed: int = 0, d: int = D):
    """Rows where c is carried by every feature: (X (n, d) float32, c (n,) int64 or float64).

    c is drawn first (binary: Bernoulli(1/2); 3-class: uniform on {0, 1, 2}; continuous: N(0, 1)), then
    x = z + (2 / √d)·u(c) with z standard normal and u(c) = (c − ½)·s (binary), (c − 1)·s (3-class) or c·s
    (continuous), s a random ±1 vector: every feature's mean moves with c by 2/√d of its sd
    (0.2 sd at d = 100), so the independence test finds every feature dependent on c, and the groups
    are about 2 sd apart in all (an aux ROC-AUC near 0.9, not a perfect one).
    """
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    signs = torch.from_numpy(rng.choice([-1.0, 1.0], size=d).astype(np.float32))
    if c_kind == "binary":
        c = rng.integers(0, 2, n).astype(np.int64)
        u = c - 0.5
    elif c_kind == "3class":
        c = rng.integers(0, 3, n).astype(np.int64)
        u = c - 1.0
    else:
        c = rng.standard_normal(n)
        u = c
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=gen, dtype=torch.float32)
    scale = torch.from_numpy((2.0 / np.sqrt(d) * u).astype(np.float32))
    for start in range(0, n, 65_536):                                   # in place: no (n, d) temporary
        X[start:start + 65_536].addr_(scale[start:start + 65_536], signs)
    return X, c


def build_swap(n: int, c_kind: str, seed: int = 0, d: int = D, train_rows: int = 20_000):
    """The swap cases' set-up: :func:`carried_rows`, a random-init target and an auxiliary model trained on the
    first ``train_rows`` rows (:class:`~faux_checks.method.auxiliary.AuxiliaryModel`, hidden (64, 64), at most
    10 epochs). Returns (X, c, target, aux)."""
    import torch

    from faux_checks.method.auxiliary import AuxiliaryModel

    torch.manual_seed(seed)
    X, c = carried_rows(n, c_kind, seed, d)
    kind = {"binary": "binary", "3class": "multiclass", "continuous": "continuous"}[c_kind]
    rows = min(train_rows, n)
    aux = AuxiliaryModel(kind=kind, hidden=HIDDEN, epochs=10, seed=seed).fit(X[:rows].numpy(), c[:rows])
    for p in aux.net_.parameters():
        p.requires_grad_(False)
    return X, c, _target(d), aux


def floor_pass(target, aux, X, chunk_size: int, parts: str = "both") -> None:
    """The autograd floor: target gradient + k aux gradients per chunk, float32, nothing kept."""
    import torch

    k = aux.n_jacobian_outputs
    n = X.shape[0]
    for start in range(0, n, chunk_size):
        xs = X[start : start + chunk_size]
        if parts in ("both", "target"):
            x = xs.detach().requires_grad_(True)
            torch.autograd.grad(target(x)[:, 0].sum(), x)
        if parts in ("both", "aux"):
            xa = xs.detach().requires_grad_(True)
            out = aux.outputs(xa)
            for j in range(k):
                torch.autograd.grad(out[:, j].sum(), xa, retain_graph=j < k - 1)


def swap_floor_pass(target, aux, X, chunk_size: int, n_groups: int, metric) -> None:
    """What the swap reading cannot avoid, per chunk (float32, batch-sum trick, nothing kept): the target's
    forward at x; one aux forward and, per other group, one aux backward, the metric product M·a
    ((b, d_free) x (d_free, d_free)) and the target's forward at the moved x′. ``metric``: the reference's
    metric on its free features, float32 Tensor. Continuous c (``n_groups`` 0): one backward and one metric
    product shared by the two moves (±1 sd), and the target's forward at each."""
    import torch

    n = X.shape[0]
    grads = 1 if n_groups == 0 else n_groups - 1
    moves = 2 if n_groups == 0 else 1
    for start in range(0, n, chunk_size):
        xs = X[start : start + chunk_size]
        with torch.no_grad():
            target(xs)
        xa = xs.detach().requires_grad_(True)
        out = aux.net_(xa)
        for j in range(grads):
            (g,) = torch.autograd.grad(out[:, -1 - j].sum(), xa, retain_graph=j < grads - 1)
            g[:, : metric.shape[0]] @ metric
            with torch.no_grad():
                for sign in (1.0, -1.0)[:moves]:
                    target(xs + sign * g)
        del out


def naive_loop(target, aux, X) -> None:
    """Per-individual reference: autograd.functional.jacobian per row, then |g · pinv(J)|_inf."""
    import torch
    from torch.autograd.functional import jacobian

    def prob(v):
        return torch.sigmoid(target(v[None])[0, 0])

    def aux_out(v):
        return aux.outputs(v[None])[0]

    for i in range(X.shape[0]):
        x = X[i]
        g = jacobian(prob, x)                      # (d,)
        J = jacobian(aux_out, x)                   # (k, d)
        float((g @ torch.linalg.pinv(J)).abs().max())


# ---------------------------------------------------------------------------- what-if (not the library)
def fast_lic(g, J):
    """fAux eq. 9 without (b, k, d) float64 temporaries and without evidence.

    Gram JJᵀ (b, k, k) and g·Jᵀ (b, k) by batched matmul in float64; components by a k x k solve
    with a (b, k, 1) right-hand side (k = 1: a division). Same zero-gradient rule as the library;
    non-finite J or g is detected on the (b, k, k) and (b, k) reductions instead of elementwise on
    (b, k, d) (a NaN or inf anywhere in a row of J or g makes its Gram or g·Jᵀ non-finite: inf·0
    is NaN; float32 J cannot overflow a float64 Gram). The ill-conditioning rule (eigvalsh) is left
    out here (see the profile for its cost and a closed form for k = 2).
    Returns (scores (b,), undefined (b,)).
    """
    import torch

    J64, g64 = J.double(), g.double()
    gram = J64 @ J64.transpose(1, 2)                                      # (b, k, k)
    gJ = J64 @ g64[:, :, None]                                            # (b, k, 1)
    finite = torch.isfinite(gram).flatten(1).all(dim=1) & torch.isfinite(gJ).flatten(1).all(dim=1)
    undefined = ~finite | (torch.diagonal(gram, dim1=1, dim2=2) <= 1e-30).all(dim=1)
    if gram.shape[1] == 1:
        comp = gJ[:, :, 0] / gram[:, 0]
    else:
        eye = torch.eye(gram.shape[1], dtype=torch.float64)
        comp = torch.linalg.solve(torch.where(undefined[:, None, None], eye, gram), gJ)[:, :, 0]
    scores = torch.where(undefined, torch.full((), float("nan"), dtype=torch.float64), comp.abs().amax(dim=1))
    return scores, undefined


def whatif_evaluate(target, aux, X, chunk_size: int):
    """FAuxTester.evaluate(X, evidence=False) for variant faux, no protected columns, with the
    proposed changes: finiteness checked per chunk (no whole-X isfinite temporaries), the
    batch-independence probes on 8 rows (no X[:, keep] copy of all n), no column copies when no
    column is masked, and :func:`fast_lic`. Target gradient and aux Jacobian: the library's own."""
    import numpy as np
    import torch

    from faux_checks import TargetOutput
    from faux_checks.method._batching import eval_mode, iter_chunks
    from faux_checks.method.gradients import (
        check_batch_independence,
        output_jacobian,
        target_probability_and_gradient,
    )
    from faux_checks.method.output import resolve_output_form

    n = X.shape[0]
    output = resolve_output_form(target, X[:256], TargetOutput(form="logit"))
    with eval_mode(target):
        check_batch_independence(lambda x: target(x), X[:8])
    check_batch_independence(aux.outputs, X[:8])
    scores = np.empty(n)
    undefined = np.empty(n, dtype=bool)
    prob = np.empty(n)
    for sl in iter_chunks(n, chunk_size):
        x = X[sl]
        if not bool(torch.isfinite(x).all()):
            raise ValueError("non-finite X")
        p, g = target_probability_and_gradient(target, x, output, chunk_size=chunk_size)
        J = output_jacobian(aux.outputs, x, chunk_size=chunk_size)
        s, u = fast_lic(g, J)
        scores[sl] = s.numpy()
        undefined[sl] = u.numpy()
        prob[sl] = p.numpy()
    return scores, undefined, prob


# ---------------------------------------------------------------------------- worker: one case
def run_case(case: str, args) -> dict:
    import numpy as np
    import torch

    from faux_checks import FAuxTester, TargetOutput

    torch.set_num_threads(args.threads)
    variant, c_kind = case.split("-")[:2]
    evidence = case.endswith("-evidence")
    t_aux = time.perf_counter()
    if variant == "swap":
        X, groups, target, aux = build_swap(args.n, c_kind, d=int(args.d))
    else:
        X, target, aux = build(args.n, c_kind, d=int(args.d))
    t_aux = time.perf_counter() - t_aux
    rows = X if variant != "ig" else X[: args.ig_n].clone()
    device = torch.device("cpu")
    if args.device != "cpu" and variant == "swap":
        from faux_checks._device import resolve_device

        device = resolve_device(args.device)
    tester_device = {} if device.type == "cpu" else {"device": device}   # the --compare-with library may predate it
    floor_target, floor_aux, floor_rows = target, aux, rows
    if device.type != "cpu":
        floor_target = copy.deepcopy(target).to(device)
        floor_aux = copy.copy(aux)
        floor_aux.net_ = copy.deepcopy(aux.net_).to(device)
        floor_rows = rows.to(device)
    n_rows = rows.shape[0]
    res: dict = {"case": case, "variant": variant, "c": c_kind, "k": aux.n_jacobian_outputs,
                 "n": n_rows, "evidence": evidence, "chunk_size": args.chunk_size,
                 "threads": args.threads, "rss_after_setup_mb": peak_rss_mb(), "device": device.type,
                 "d": int(args.d), "all_free": bool(getattr(args, "all_free", False))}

    if variant == "whatif":
        def run():
            return whatif_evaluate(target, aux, rows, args.chunk_size)
    elif variant == "swap":
        t0 = time.perf_counter()
        tester = FAuxTester(target, aux, variant="swap", output=TargetOutput(form="logit", target_class=1),
                            chunk_size=args.chunk_size, **tester_device)
        ref = slice(0, min(20_000, n_rows))
        hold = slice(min(20_000, n_rows), min(30_000, n_rows))
        free_all = {"metric": "covariance", "hold_independent": False} if args.all_free else {}
        informative = args.informativeness and n_rows > 20_000
        tester.fit_reference(X[ref], groups[ref], holdout=(X[hold], groups[hold]) if informative else None,
                             **free_all)
        res["reference_s"] = time.perf_counter() - t0
        res["aux_fit_s"] = t_aux
        res["aux_quality"] = float(aux.quality_)
        res["informativeness_test"] = bool(informative)
        free = ~tester.reference.admissible
        res["free_features"] = int(free.sum())
        swap_metric = torch.as_tensor(tester.reference.metric[np.ix_(free, free)], dtype=torch.float32, device=device)
        n_groups = {"binary": 2, "3class": 3, "continuous": 0}[c_kind]

        def run():
            r = tester.evaluate(rows, groups, evidence=evidence)
            return r.scores, r.undefined, r.probability
    else:
        tester = FAuxTester(target, aux, variant=variant, output=TargetOutput(form="logit", target_class=1),
                            ig_steps=args.ig_steps, chunk_size=args.chunk_size)

        def run():
            r = tester.evaluate(rows, evidence=evidence)
            return r.scores, r.undefined, r.probability

    floors, cases, swap_floors, rss_floor = [], [], [], None
    for _ in range(args.repeats):                       # interleaved: floor, (swap floor), case, floor, ...
        floors.append(timed(lambda: synced(floor_pass(floor_target, floor_aux, floor_rows, args.chunk_size), device))[:2])
        if variant == "swap":
            swap_floors.append(timed(lambda: synced(swap_floor_pass(floor_target, floor_aux, floor_rows, args.chunk_size,
                                                                    n_groups, swap_metric), device))[:2])
        if rss_floor is None:
            rss_floor = peak_rss_mb()
        w, c, out = timed(run)
        cases.append((w, c))
        scores, undefined, _ = out
        del out
    res["rss_after_floor_mb"] = rss_floor
    res["peak_rss_mb"] = peak_rss_mb()                  # before the naive loop (which adds nothing large)
    res["floor_s"] = min(f[0] for f in floors)
    res["floor_cpu_s"] = min(f[1] for f in floors)
    res["time_s"] = min(c[0] for c in cases)
    res["cpu_s"] = min(c[1] for c in cases)
    res["all_times_s"] = [c[0] for c in cases]
    res["all_floor_s"] = [f[0] for f in floors]
    res["rows_per_s"] = n_rows / res["time_s"]
    res["floor_rows_per_s"] = n_rows / res["floor_s"]
    res["ratio_to_floor"] = res["time_s"] / res["floor_s"]
    res["ratio_to_floor_cpu"] = res["cpu_s"] / res["floor_cpu_s"]
    res["ratio_paired_median"] = statistics.median(c[0] / f[0] for c, f in zip(cases, floors, strict=False))
    if swap_floors:
        res["swap_floor_s"] = min(f[0] for f in swap_floors)
        res["swap_floor_cpu_s"] = min(f[1] for f in swap_floors)
        res["ratio_to_swap_floor"] = res["time_s"] / res["swap_floor_s"]
        res["ratio_to_swap_floor_cpu"] = res["cpu_s"] / res["swap_floor_cpu_s"]
    res["undefined"] = int(np.sum(undefined))
    res["score_median"] = float(np.nanmedian(scores))

    if variant == "faux" and not evidence and args.naive_n > 0:
        sub = X[: args.naive_n].clone()
        t_naive = timed(lambda: naive_loop(target, aux, sub))[0]
        res["naive_rows_per_s"] = args.naive_n / t_naive
        res["speedup_vs_naive"] = res["rows_per_s"] / res["naive_rows_per_s"]
    return res


# ---------------------------------------------------------------------------- worker: profile
class CallProfiler:
    """Wraps library functions by name and times the real ``FAuxTester.evaluate`` through them.

    Times are exclusive (a wrapped call's time minus the wrapped calls inside it) and keyed by the
    call path, e.g. ``faux_scores > _damped_gram``; what evaluate spends outside every wrapped
    function is reported as its body. Wrapping by name keeps the profile in step with the library
    as it changes: a function that no longer exists is skipped.
    """

    def __init__(self):
        self.wall: dict = {}
        self.cpu: dict = {}
        self.calls: dict = {}
        self.rss: dict = {}
        self._stack: list = []
        self._restore: list = []

    def reset(self) -> None:
        self.wall, self.cpu, self.calls, self.rss = {}, {}, {}, {}

    def wrap(self, owner, attr: str) -> None:
        orig = owner.__dict__.get(attr) if isinstance(owner, type) else getattr(owner, attr, None)
        if orig is None:
            return
        prof = self

        def wrapper(*a, **kw):
            path = " > ".join([f[0] for f in prof._stack] + [attr])
            frame = [attr, 0.0, 0.0]                 # name, child wall, child CPU
            prof._stack.append(frame)
            r0 = peak_rss_mb()
            c0, t0 = time.process_time(), time.perf_counter()
            try:
                return orig(*a, **kw)
            finally:
                w, c = time.perf_counter() - t0, time.process_time() - c0
                prof._stack.pop()
                prof.wall[path] = prof.wall.get(path, 0.0) + w - frame[1]
                prof.cpu[path] = prof.cpu.get(path, 0.0) + c - frame[2]
                prof.calls[path] = prof.calls.get(path, 0) + 1
                prof.rss[path] = max(prof.rss.get(path, 0.0), peak_rss_mb() - r0)
                if prof._stack:
                    prof._stack[-1][1] += w
                    prof._stack[-1][2] += c

        setattr(owner, attr, wrapper)
        self._restore.append((owner, attr, orig))

    def unwrap(self) -> None:
        for owner, attr, orig in reversed(self._restore):
            setattr(owner, attr, orig)
        self._restore = []


def run_profile(c_kind: str, args) -> dict:
    """Profile the real FAuxTester.evaluate (variant faux, evidence=False) by wrapping the library
    functions it calls, then time the LIC step's parts and alternatives on one chunk's g and J."""
    import numpy as np
    import torch

    import faux_checks.method.auxiliary as auxmod
    import faux_checks.method.batch_probe as probe_mod
    import faux_checks.method.faux as fx
    import faux_checks.method.gradients as grad_mod
    import faux_checks.method.lic as lic
    from faux_checks import FAuxTester, TargetOutput
    from faux_checks.method.gradients import target_probability_and_gradient
    from faux_checks.method.lic import faux_scores

    torch.set_num_threads(args.threads)
    X, target, aux = build(args.n, c_kind)
    n, d = X.shape
    k = aux.n_jacobian_outputs
    cs = args.chunk_size
    out: dict = {"case": f"profile-{c_kind}", "n": n, "chunk_size": cs, "k": k, "threads": args.threads,
                 "rss_after_setup_mb": peak_rss_mb()}

    # the whole-X finiteness check evaluate does first, alone: time and peak-RSS rise
    r0 = peak_rss_mb()
    w, c, _ = timed(lambda: bool(torch.isfinite(X).all()))
    out["isfinite_X"] = {"wall_s": w, "cpu_s": c, "rss_rise_mb": peak_rss_mb() - r0}

    prof = CallProfiler()
    for owner, attrs in ((fx, ("as_tensor", "resolve_output_form", "float64_copy",
                               "target_probability_and_gradient", "faux_scores", "faux_ng_scores")),
                         (probe_mod, ("check_batch_independence",)),
                         (auxmod.AuxiliaryModel, ("jacobian",)),
                         (auxmod, ("output_jacobian",)),
                         (grad_mod, ("_target_chunk", "_input_grad")),
                         (lic, ("pseudo_inverse_rows", "_damped_gram", "_scores_from_components"))):
        for attr in attrs:
            prof.wrap(owner, attr)
    tester = FAuxTester(target, aux, variant="faux", output=TargetOutput(form="logit"), chunk_size=cs)
    best_w: dict = {}
    best_c: dict = {}
    totals = []
    r0 = peak_rss_mb()
    try:
        for rep in range(args.repeats):
            prof.reset()
            w, c, _ = timed(lambda: tester.evaluate(X, evidence=False))
            totals.append((w, c))
            prof.wall["(evaluate body: outside the functions above)"] = w - sum(prof.wall.values())
            prof.cpu["(evaluate body: outside the functions above)"] = c - sum(prof.cpu.values())
            for key in prof.wall:
                best_w[key] = min(best_w.get(key, float("inf")), prof.wall[key])
                best_c[key] = min(best_c.get(key, float("inf")), prof.cpu[key])
            if rep == 0:
                out["stages_rss_rise_mb"] = dict(prof.rss)
                out["evaluate_rss_rise_mb"] = peak_rss_mb() - r0
                out["stages_calls"] = dict(prof.calls)
    finally:
        prof.unwrap()
    out["stages_s"] = best_w
    out["stages_cpu_s"] = best_c
    out["evaluate_s"] = min(t[0] for t in totals)
    out["evaluate_cpu_s"] = min(t[1] for t in totals)
    out["floor_s"], out["floor_cpu_s"], _ = best_of(lambda: floor_pass(target, aux, X, cs), args.repeats)
    out["floor_target_s"], out["floor_target_cpu_s"], _ = best_of(
        lambda: floor_pass(target, aux, X, cs, "target"), args.repeats)
    out["floor_aux_s"], out["floor_aux_cpu_s"], _ = best_of(lambda: floor_pass(target, aux, X, cs, "aux"), args.repeats)

    # the LIC step on one chunk's g and J, library vs alternative, and its internal operations
    sl = slice(0, min(cs, n))
    _, g = target_probability_and_gradient(target, X[sl], TargetOutput(form="logit"), chunk_size=cs)
    J = aux.jacobian(X[sl], chunk_size=cs)
    scale = n / (sl.stop - sl.start)
    reps = max(3, args.repeats)
    ref = faux_scores(g, J).scores
    try:
        faux_scores(g[:2], J[:2], evidence=False)
        lib_noev = lambda: faux_scores(g, J, evidence=False).scores  # noqa: E731
    except TypeError:                                   # a library without the evidence switch
        lib_noev = lambda: faux_scores(g, J).scores  # noqa: E731
    alt = {}
    for name, fn in (("library faux_scores(evidence=True)", lambda: faux_scores(g, J).scores),
                     ("library faux_scores(evidence=False)", lib_noev),
                     ("fast_lic (this script): finiteness on the reductions, no (b,k,d) where/isfinite",
                      lambda: fast_lic(g, J)[0])):
        w, c, val = best_of(fn, reps)
        rel = float(np.nanmax(np.abs(val.numpy() - ref.numpy()) / np.abs(ref.numpy())))
        alt[name] = {"wall_s": w * scale, "cpu_s": c * scale, "max_rel_diff": rel}
    out["lic_alternatives"] = alt

    J64, g64 = J.double(), g.double()
    gram = J64 @ J64.transpose(1, 2)
    nanf = torch.full((), float("nan"), dtype=torch.float64)
    nomask = torch.zeros(J64.shape[0], dtype=torch.bool)
    ops = [("J.double(): (b,k,d) float64 copy", lambda: J.double()),
           ("torch.isfinite(J64).flatten(1).all(1)", lambda: torch.isfinite(J64).flatten(1).all(dim=1)),
           ("gram = J64 @ J64ᵀ (b,k,k)", lambda: J64 @ J64.transpose(1, 2)),
           ("terms = M * g64 (b,k,d) + sum(2)", lambda: (J64 * g64[:, None, :]).sum(dim=2)),
           ("g·Jᵀ by batched matmul (b,k,1)", lambda: J64 @ g64[:, :, None]),
           ("evidence gather terms[arange, top] (b,d)", lambda: J64[torch.arange(J64.shape[0]), 0]),
           ("torch.where NaN fill of a (b,k,d) tensor", lambda: torch.where(nomask[:, None, None], nanf, J64))]
    if k == 1:
        ops.append(("M = J64 / ‖a‖² (b,1,d)", lambda: J64 / gram[:, 0, :, None]))
    else:
        def closed_form_k2():
            a, b_, c = gram[:, 0, 0], gram[:, 0, 1], gram[:, 1, 1]
            half_tr, disc = 0.5 * (a + c), torch.sqrt((0.5 * (a - c)) ** 2 + b_ * b_)
            return half_tr - disc, half_tr + disc

        def solve_1thread():
            prev = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                return torch.linalg.solve(gram, J64)
            finally:
                torch.set_num_threads(prev)

        ops += [("torch.linalg.eigvalsh(gram): the conditioning check", lambda: torch.linalg.eigvalsh(gram)),
                ("closed-form 2x2 eigenvalues (same check, k=2)", closed_form_k2),
                (f"torch.linalg.solve(gram, J64) -> M (b,k,d), {args.threads} threads", lambda: torch.linalg.solve(gram, J64)),
                ("torch.linalg.solve(gram, J64) -> M (b,k,d), 1 thread", solve_1thread),
                ("torch.linalg.inv_ex(gram) @ J64 -> M (b,k,d)", lambda: torch.linalg.inv_ex(gram)[0] @ J64),
                ("torch.linalg.solve(gram, J64 @ g) -> components (b,k,1)",
                 lambda: torch.linalg.solve(gram, J64 @ g64[:, :, None]))]
    # inside target_probability_and_gradient (logit form) on the same chunk
    xs = X[sl]

    def autograd_logit():
        x = xs.detach().requires_grad_(True)
        z = target(x)[:, 0]
        return torch.autograd.grad(z.sum(), x)[0], z.detach()

    gz, z = autograd_logit()
    dp = torch.sigmoid(z.double()) * torch.sigmoid(-z.double())
    buf = torch.empty(gz.shape, dtype=torch.float64)
    ops += [("target: autograd of the logit (float32, = floor's target part)", autograd_logit),
            ("target: g = gz.double() * σ'(z) (b,d) float64", lambda: gz.double() * dp[:, None]),
            ("target: copy g into the (b,d) float64 grads buffer", lambda: buf.copy_(gz)),
            ("target: float32 gz·J (b,k) then × σ'(z) (b,) in float64, the alternative",
             lambda: (J @ gz[:, :, None])[:, :, 0].double() * dp[:, None])]
    inner = {}
    for name, fn in ops:
        w, c, _ = best_of(fn, reps)
        inner[name] = {"wall_s": w * scale, "cpu_s": c * scale}
    out["lic_internals"] = inner

    sweep = {}
    for c in (4_096, 16_384, 65_536, 262_144):
        w, cpu, _ = best_of(lambda c=c: floor_pass(target, aux, X, c), args.repeats)
        t = FAuxTester(target, aux, variant="faux", output=TargetOutput(form="logit"), chunk_size=c)
        we, ce, _ = best_of(lambda t=t: t.evaluate(X, evidence=False), args.repeats)
        sweep[c] = {"rows_per_s": n / w, "cpu_s": cpu, "eval_rows_per_s": n / we, "eval_cpu_s": ce}
    out["floor_by_chunk"] = sweep
    out["peak_rss_mb"] = peak_rss_mb()
    return out


# ---------------------------------------------------------------------------- driver
def spawn(worker: str, args, library: str | None = None, d: int = D, sweep: bool = False) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", worker, "--d", str(d),
           *([f"--library={os.path.abspath(library)}"] if library else []),
           "--n", str(args.n), "--ig-n", str(args.ig_n), "--ig-steps", str(args.ig_steps),
           "--naive-n", str(args.naive_n), "--chunk-size", str(args.chunk_size),
           "--repeats", str(args.repeats), "--threads", str(args.threads), "--device", args.device,
           *(["--all-free"] if args.all_free else []), *(["--informativeness"] if args.informativeness else [])]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"worker {worker} failed with exit code {proc.returncode}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["load_avg_1min_after"] = os.getloadavg()[0]
    if library:
        res["case"] = f"{res['case']}@{os.path.basename(os.path.abspath(library))}"
        res["library"] = os.path.abspath(library)
    if sweep:
        res["case"] = f"{res['case']} d={d}"
    print(f"  [{worker}: {time.perf_counter() - t0:.1f} s, load average {res['load_avg_1min_after']:.1f}]",
          file=sys.stderr, flush=True)
    return res


def print_table(results: list[dict], args) -> None:
    print(f"\nfAux scoring benchmark: d={','.join(str(d) for d in sorted({r.get('d', D) for r in results}))}, target and aux 2x{HIDDEN[0]} ReLU MLPs (target: random init; "
          f"aux: trained on rows where c moves every feature for the swap cases, an untrained AuxNet for the others), "
          f"chunk_size={args.chunk_size:,}, torch threads={args.threads}, "
          f"{args.repeats} interleaved floor/case runs, best kept; {os.cpu_count()} CPUs, "
          f"load average during the run {min(r['load_avg_1min_after'] for r in results):.1f}"
          f"-{max(r['load_avg_1min_after'] for r in results):.1f}")
    print("x swapfl: best wall / best swap-floor wall (swap cases: target forward at x and each x′, aux forward, one aux "
          "backward and one metric product per other group), and in CPU time")
    print("x floor: best wall / best floor wall, same process; paired: median over runs of (case / floor just before);"
          " CPU: in CPU time")
    print("setup / peak MB: the worker process's ru_maxrss after X + models / at the end (process peak: torch, X, "
          "models, temporaries, outputs)\n")
    hdr = (f"{'case':<28}{'k':>2}{'rows':>11}{'time s':>8}{'rows/s':>10}{'floor rows/s':>13}"
           f"{'x floor':>8}{'paired':>7}{'CPU':>6}{'x swapfl':>9}{'CPU':>6}{'setup MB':>9}{'peak MB':>8}{'vs naive':>9}")
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        sp = r.get("speedup_vs_naive")
        swf = (f"{r['ratio_to_swap_floor']:>9.2f}{r['ratio_to_swap_floor_cpu']:>6.2f}" if "ratio_to_swap_floor" in r
               else f"{'-':>9}{'-':>6}")
        print(f"{r['case']:<28}{r['k']:>2}{r['n']:>11,}{r['time_s']:>8.2f}{r['rows_per_s']:>10,.0f}"
              f"{r['floor_rows_per_s']:>13,.0f}{r['ratio_to_floor']:>8.2f}{r['ratio_paired_median']:>7.2f}"
              f"{r['ratio_to_floor_cpu']:>6.2f}{swf}{r['rss_after_setup_mb']:>9,.0f}{r['peak_rss_mb']:>8,.0f}"
              f"{('-' if sp is None else f'{sp:,.0f}x'):>9}")
    print()
    for r in results:
        print(result_line(r))
    for r in results:
        if "naive_rows_per_s" in r:
            print(f"naive per-row autograd.functional.jacobian loop ({r['c']} c, {args.naive_n:,} rows): "
                  f"{r['naive_rows_per_s']:,.0f} rows/s -> {r['n'] / r['naive_rows_per_s'] / 60:,.1f} min for "
                  f"{r['n']:,} rows")
    if any(r["variant"] == "whatif" for r in results):
        print("whatif-*: not the library; benchmarks/bench_scoring.py:whatif_evaluate with the profile's proposed changes")
    main = next((r for r in results if r["case"] == "swap-binary"), None)
    if main:
        ok = lambda b: "PASS" if b else "FAIL"  # noqa: E731
        print(f"\ngoals (binary c, the default reading swap, evidence=False, n={main['n']:,}; reference fitted once in "
              f"{main.get('reference_s', float('nan')):.1f} s, not timed):")
        print(f"  ratio to floor {main['ratio_to_floor']:.2f} <= {SELECTION_RATIO} (the reading's selection rule, "
              f"docs/benchmark.md): {ok(main['ratio_to_floor'] <= SELECTION_RATIO)}; <= {GOAL_RATIO} (the performance "
              f"goal): {ok(main['ratio_to_floor'] <= GOAL_RATIO)}"
              f"  (paired median {main['ratio_paired_median']:.2f}, CPU time {main['ratio_to_floor_cpu']:.2f})")
        print(f"  rows/s {main['rows_per_s']:,.0f} >= {GOAL_ROWS_PER_S:,}: {ok(main['rows_per_s'] >= GOAL_ROWS_PER_S)}"
              f"  (the floor itself ran at {main['floor_rows_per_s']:,.0f} rows/s in this process)")
        print(f"  peak RSS {main['peak_rss_mb']:,.0f} MB < {GOAL_RSS_MB:,} MB: {ok(main['peak_rss_mb'] < GOAL_RSS_MB)}"
              + ("" if main["n"] >= 1_000_000 else "  (n < 1M: not the goal's size)"))


def print_profile(p: dict) -> None:
    print(f"\nprofile of the real FAuxTester.evaluate (faux, evidence=False), {p['case']}, n={p['n']:,}, k={p['k']}, "
          f"chunk={p['chunk_size']:,}, threads={p['threads']}; exclusive times by call path, best of runs; columns: "
          f"wall s, CPU s, share of CPU, calls, peak-RSS rise MB (first run; setup {p['rss_after_setup_mb']:,.0f} MB)")
    tc = p["evaluate_cpu_s"]
    for key, c in sorted(p["stages_cpu_s"].items(), key=lambda kv: -kv[1]):
        print(f"  {p['stages_s'][key]:8.3f} {c:8.3f} {100 * c / tc:5.1f}% {p['stages_calls'].get(key, 1):5d} "
              f"{p['stages_rss_rise_mb'].get(key, 0.0):7,.0f}  {key}")
    print(f"  {p['evaluate_s']:8.3f} {tc:8.3f}  evaluate total (peak-RSS rise {p['evaluate_rss_rise_mb']:,.0f} MB)")
    f = p["isfinite_X"]
    print(f"  of the body: torch.isfinite(X).all() on all n alone: {f['wall_s']:.3f} s wall, {f['cpu_s']:.3f} s CPU, "
          f"peak-RSS rise {f['rss_rise_mb']:,.0f} MB")
    print(f"  autograd floor, same process: {p['floor_s']:.3f} s wall, {p['floor_cpu_s']:.3f} s CPU "
          f"(target part {p['floor_target_s']:.3f} / {p['floor_target_cpu_s']:.3f}, aux part {p['floor_aux_s']:.3f} / "
          f"{p['floor_aux_cpu_s']:.3f}); evaluate / floor = {p['evaluate_s'] / p['floor_s']:.2f} wall, "
          f"{tc / p['floor_cpu_s']:.2f} CPU")
    print("  LIC step on one chunk, scaled to n (wall s, CPU s):")
    for key, v in p["lic_alternatives"].items():
        print(f"    {v['wall_s']:7.3f} {v['cpu_s']:7.3f}  {key}  (max rel diff vs evidence=True {v['max_rel_diff']:.1e})")
    print("  LIC and target-gradient internal operations on one chunk, scaled to n (wall s, CPU s):")
    for key, v in p["lic_internals"].items():
        print(f"    {v['wall_s']:7.3f} {v['cpu_s']:7.3f}  {key}")
    print("  by chunk size, rows/s wall (CPU s): " + ", ".join(
        f"{int(c):,}: floor {v['rows_per_s']:,.0f} ({v['cpu_s']:.2f}), evaluate {v['eval_rows_per_s']:,.0f} "
        f"({v['eval_cpu_s']:.2f})" for c, v in p["floor_by_chunk"].items()))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="individuals (default 1,000,000)")
    ap.add_argument("--ig-n", type=int, default=20_000, help="rows for the IG variant (default 20,000)")
    ap.add_argument("--ig-steps", type=int, default=32)
    ap.add_argument("--naive-n", type=int, default=2_000, help="rows for the per-row jacobian loop (0: skip)")
    ap.add_argument("--chunk-size", type=int, default=None, help="rows per chunk (default: the library's DEFAULT_CHUNK)")
    ap.add_argument("--repeats", type=int, default=2, help="interleaved floor/case runs; the best is kept (default 2)")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated subset of {','.join(CASES)}")
    ap.add_argument("--d", default=str(D), help=f"encoded features (default {D}); a comma-separated list sweeps them "
                    "(e.g. 20,100,400: the swap move's metric product grows as d squared)")
    ap.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"],
                    help="where the swap cases score (default cpu; cuda: the floors run there too)")
    ap.add_argument("--all-free", action="store_true",
                    help="swap cases: every feature free (metric 'covariance', hold_independent=False), so the "
                         "d-squared metric product is exercised in full")
    ap.add_argument("--informativeness", action="store_true",
                    help="swap cases: also run the informativeness test on 10,000 held-out rows (it can only hold "
                         "features; O(d) aux passes over them, a fixed cost per check that is not timed)")
    ap.add_argument("--profile", action="store_true", help="also profile the stages of binary and 3-class fAux")
    ap.add_argument("--json", default=None, help="also write all results to this JSON file")
    ap.add_argument("--compare-with", default=None, metavar="CHECKOUT",
                    help="also run every case with the faux_checks package of this other checkout (e.g. the code "
                         "before a change: git archive <commit> faux_checks | tar -x -C DIR), interleaved with this "
                         "one's, so that before and after are measured in one run; rows named case@DIR")
    ap.add_argument("--library", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.chunk_size is None:
        from faux_checks.method._batching import DEFAULT_CHUNK

        args.chunk_size = DEFAULT_CHUNK

    if args.worker:
        if args.worker.startswith("profile-"):
            res = run_profile(args.worker.split("-", 1)[1], args)
        else:
            res = run_case(args.worker, args)
        print(json.dumps(res))
        return

    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        ap.error(f"unknown case(s) {sorted(unknown)}; choose from {CASES}")
    results = []
    dims = [int(x) for x in args.d.split(",") if x]
    sweep = len(dims) > 1
    for d in dims:
        for c in cases:
            if args.compare_with:
                results.append(spawn(c, args, library=args.compare_with, d=d, sweep=sweep))
            results.append(spawn(c, args, d=d, sweep=sweep))
    profiles = [spawn(f"profile-{c}", args) for c in ("binary", "3class")] if args.profile else []
    main_d = D if D in dims else dims[0]
    ours = [r for r in results if "library" not in r]
    main_res = next((r for r in ours if r["case"].startswith("swap-binary") and r.get("d") == main_d),
                    next((r for r in ours if r.get("d") == main_d), ours[0]))
    print_table(results, args)
    for p in profiles:
        print_profile(p)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"results": results, "profiles": profiles, "args": vars(args)}, fh, indent=2)
    print(result_line(main_res))


def result_line(r: dict) -> str:
    """One result as ``key=value`` fields: the case, its free features (swap cases), rows, d, device and the
    ratio to the autograd floor (wall; CPU time beside it), rows/s and the worker's peak RSS."""
    free = r.get("free_features")
    return (f"case={r['case'].split(' ')[0]} free={'-' if free is None else free} rows={r['n']} d={r.get('d', D)} "
            f"device={r.get('device', 'cpu')} ratio_to_floor={r['ratio_to_floor']:.3f} "
            f"ratio_to_floor_cpu={r['ratio_to_floor_cpu']:.3f} rows_per_s={r['rows_per_s']:.0f} "
            f"peak_rss_mb={r['peak_rss_mb']:.0f}")


if __name__ == "__main__":
    main()
