"""The auxiliary model f_aux: predicts the protected attribute c from the features x.

Follows the scikit-learn estimator contract (docs/architecture.md, "How code reads"): the
constructor only stores its arguments, ``fit`` returns ``self``, learned state ends with ``_``.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Sequence

import numpy as np
import torch
from torch import nn

from .._threads import one_torch_thread
from .._validation import check_finite_matrix, fmt_count
from ..errors import InputError
from ..kinds import KINDS, Kind
from ._batching import as_tensor
from .gradients import output_jacobian

__all__ = ["holdout_split", "AuxiliaryModel", "AuxNet", "OutputSpace"]

OutputSpace = Literal["logit", "probability"]


class AuxNet(nn.Module):
    """MLP with a fixed input standardisation: x ↦ k raw outputs (logits or a regression value).

    Input shape (b, d), output shape (b, k). Standardisation buffers (mean, scale) are part of
    the module, so gradients are taken with respect to the features as the target sees them.
    """

    def __init__(self, d: int, k: int, hidden: Sequence[int], mean: torch.Tensor, scale: torch.Tensor):
        super().__init__()
        self.register_buffer("mean", mean.float())
        self.register_buffer("scale", scale.float())
        layers: list[nn.Module] = []
        width = d
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, k))
        self.mlp = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp((x - self.mean) / self.scale)


class AuxiliaryModel:
    """Auxiliary model of fAux: an MLP that predicts the protected attribute c from x.

    Parameters
    ----------
    kind : {"binary", "multiclass", "continuous"}
        Type of c. Binary: one logit; multi-class with m groups: m logits; continuous: one
        standardised regression output.
    hidden : sequence of int
        Hidden layer widths (ReLU).
    epochs : int
        Maximum training epochs; training stops early when the held-out loss has not improved
        for ``patience`` epochs, and the best weights are kept.
    lr, batch_size, weight_decay : training settings (Adam).
        The batch size actually used is ``min(batch_size, max(32, n_train // 20))`` so that an
        epoch has at least ~20 steps on small data: an under-trained aux model has small logit
        slopes, and eq. 9 divides by ‖a‖², so it inflates every score (measured: a fair linear
        model on 1,500 rows went from 0% to 73% flagged with 24 optimiser steps, at AUC 0.986).
        Recorded in ``batch_size_``.
    holdout : float
        Share of rows held out (stratified for classes) for early stopping and ``quality_``.
    output_space : {"logit", "probability"}
        Output differentiated by :meth:`jacobian` (docs/method.md, open point 1). ``"logit"`` (default)
        does not saturate; ``"probability"`` is the paper's literal reading and explodes where
        the aux model is confident (Adult: 47% of people).
    seed : int
        Seeds the split, initialisation and batch order: same data and seed, same model.
    progress : bool
        Show a tqdm progress bar over epochs.
    device : str or torch.device
        Where the training runs ("cpu", "cuda"; resolve "auto" first with the policy's ``[scale] device``). The
        network comes back on the CPU whatever it trained on (``net_``, reports, the registry copy); the batch
        order and initial weights are drawn on the CPU, so a CUDA training differs from a CPU one by float32
        rounding only (tests/method/test_device.py).

    Attributes
    ----------
    net_ : AuxNet
    groups_ : tuple of str
        Group labels in class-index order (empty for continuous).
    quality_ : float
        Held-out ROC-AUC (binary), macro one-vs-rest ROC-AUC (multi-class) or R² (continuous).
    quality_metric_ : str
    n_features_in_ : int
    n_train_, n_holdout_ : int
    epochs_run_ : int
    holdout_ : tuple of ndarray
        Held-out (c, predicted score) pairs, for the report's ROC curve.
    holdout_rows_ : ndarray of int
        Positions (in the rows given to ``fit``) of the held-out rows.
    cache_key_, reused_from_, swap_reference_
        Set from outside (:mod:`faux_checks.gate.aux_cache`, :mod:`faux_checks.report.records`) and read with
        ``getattr(..., None)``: absent until set.

    Notes
    -----
    Multi-class Jacobian (our choice, docs/method.md, open point 1): the k − 1 log-odds of groups
    1..m−1 against group 0 (``"logit"``) or their probabilities (``"probability"``); unlike raw
    logits these do not depend on the softmax's free common shift, and unlike all m
    probabilities their Jacobian is generically full rank.
    """

    cache_key_: str                 # annotations only (no class attribute): set by gate.aux_cache
    reused_from_: str               # "run <id>": restored from a record (gate.aux_cache)
    swap_reference_: Any            # the gate's method.swap.SwapReference (report.records)

    def __init__(
        self,
        *,
        kind: Kind = "binary",
        hidden: Sequence[int] = (64, 64),
        epochs: int = 30,
        lr: float = 1e-3,
        batch_size: int = 512,
        weight_decay: float = 1e-5,
        holdout: float = 0.2,
        patience: int = 3,
        output_space: OutputSpace = "logit",
        seed: int = 0,
        progress: bool = False,
        device: str = "cpu",
    ):
        self.kind = kind
        self.hidden = hidden
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.weight_decay = weight_decay
        self.holdout = holdout
        self.patience = patience
        self.output_space = output_space
        self.seed = seed
        self.progress = progress
        self.device = device

    # ------------------------------------------------------------------ fitting
    def fit(self, X, c, *, groups: Sequence[str] = ()) -> "AuxiliaryModel":
        """Train on features X and protected attribute c.

        Parameters
        ----------
        X : array or Tensor of shape (n, d)
            Encoded features (the target model's inputs, minus c's own columns if any).
        c : array of shape (n,)
            Class index 0..m−1 (binary/multi-class) or a float (continuous); see
            :func:`faux_checks.encode_protected`.
        groups : sequence of str
            Group labels in class-index order, kept for reports.

        Returns
        -------
        self

        Raises
        ------
        InputError
            Non-finite X, fewer than 20 rows, a class with fewer than 2 rows, or shapes that differ.
        """
        return self._fit(X, c, groups, None)

    def restore(self, X, c, state: dict, *, groups: Sequence[str] = (), epochs_run: int | None = None
                ) -> "AuxiliaryModel":
        """The model :meth:`fit` trained on X and c, rebuilt from its weights instead of trained again.

        Everything but the training runs as in :meth:`fit` (the seeded split, the standardisation, the held-out
        quality, ROC and loss), so a model restored from the weights a ``fit(X, c)`` with the same settings
        learnt is that model: the same ``net_`` (an :class:`AuxNet`), ``quality_``, ``holdout_`` and scores
        (tested bit for bit in tests/gate/test_aux_store.py). The gate's recorded model is reused so.

        Parameters
        ----------
        X, c, groups : as :meth:`fit`
        state : dict of str -> Tensor
            ``net_.state_dict()`` of the trained model (``mean``, ``scale`` and the MLP's weights).
        epochs_run : int, optional
            Epochs the training ran (``epochs_run_``; None when unknown).

        Raises
        ------
        InputError
            As :meth:`fit`, or weights whose names or shapes do not fit the settings (hidden widths, d, k).
        """
        return self._fit(X, c, groups, (state, epochs_run))

    def _fit(self, X, c, groups, restore) -> "AuxiliaryModel":
        if self.kind not in KINDS:
            raise InputError(f"kind must be 'binary', 'multiclass' or 'continuous', got {self.kind!r}")
        if self.output_space not in ("logit", "probability"):
            raise InputError(f"output_space must be 'logit' or 'probability', got {self.output_space!r}")
        X = as_tensor(X)
        c = np.asarray(c)
        n, d = X.shape
        if len(c) != n:
            raise InputError(f"X has {fmt_count(n)} rows but the protected attribute has {fmt_count(len(c))}")
        if n < 20:
            raise InputError(f"the auxiliary model needs at least 20 rows to train and validate, got {n}")
        if not torch.isfinite(X).all():
            check_finite_matrix(X.numpy(), [f"feature column {j} of X" for j in range(d)], what="auxiliary model")
        gen = torch.Generator().manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)

        if not KINDS[self.kind].grouped:
            y = torch.as_tensor(c, dtype=torch.float32)
            self.c_mean_, self.c_std_ = float(y.mean()), float(y.std()) or 1.0
            target = (y - self.c_mean_) / self.c_std_
            k = 1
            train_idx, hold_idx = holdout_split(n, self.holdout, rng, strata=None)
        else:
            target = torch.as_tensor(c, dtype=torch.int64)
            m = int(target.max()) + 1
            counts = np.bincount(c.astype(np.int64), minlength=m)
            if (counts < 2).any():
                raise InputError(
                    f"protected group(s) {[i for i in range(m) if counts[i] < 2]} have fewer than 2 rows "
                    f"(counts {counts.tolist()}); the auxiliary model cannot learn them"
                )
            k = KINDS[self.kind].n_outputs(m)
            lo, hi = KINDS[self.kind].group_counts or (m, m)
            if not lo <= m <= hi:
                want = f"{lo}" if lo == hi else f"{lo} to {hi}"
                raise InputError(f"kind '{self.kind}' needs {want} groups, found {m}")
            train_idx, hold_idx = holdout_split(n, self.holdout, rng, strata=c.astype(np.int64))
        self.groups_ = tuple(groups)
        self.n_features_in_ = d
        self.n_train_, self.n_holdout_ = len(train_idx), len(hold_idx)
        self.holdout_rows_ = np.asarray(hold_idx, dtype=np.int64)

        Xt = X[train_idx]
        mean = Xt.mean(dim=0)
        scale = Xt.std(dim=0)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        with torch.random.fork_rng():  # seeded init without resetting the caller's global generator
            torch.manual_seed(self.seed)
            net = AuxNet(d, k, self.hidden, mean, scale)
            for p in net.parameters():
                if p.ndim > 1:
                    nn.init.kaiming_uniform_(p, a=math.sqrt(5), generator=gen)
        yt, Xh, yh = target[train_idx], X[hold_idx], target[hold_idx]
        self.batch_size_ = batch_size = min(self.batch_size, max(32, len(Xt) // 20))
        if restore is not None:
            return self._restored(net, restore, Xh, yh)
        device = torch.device(self.device)
        if device.type != "cpu":          # train there; the inputs move once, the batches are slices of them
            net.to(device)
            Xt_d, yt_d, Xh_d, yh_d = (t.to(device) for t in (Xt, yt, Xh, yh))
        else:
            Xt_d, yt_d, Xh_d, yh_d = Xt, yt, Xh, yh
        opt = torch.optim.Adam(net.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        bar = _progress(self.epochs, self.progress, desc="auxiliary model")
        with one_torch_thread():
            best_state, epochs_run, best = self._train(net, opt, Xt_d, yt_d, Xh_d, yh_d, gen, batch_size, bar)
        if bar is not None:
            bar.close()
        if best_state is not None:
            net.load_state_dict(best_state)
        net.to("cpu")
        net.eval()
        for p in net.parameters():
            p.requires_grad_(False)
        self.net_ = net
        self.epochs_run_ = epochs_run
        self.holdout_loss_ = best
        self._set_quality(Xh, yh)
        return self

    def _restored(self, net: AuxNet, restore, Xh: torch.Tensor, yh: torch.Tensor) -> "AuxiliaryModel":
        """:meth:`restore`'s end: the given weights in ``net``, then what :meth:`fit` sets after its training."""
        state, epochs_run = restore
        try:
            net.load_state_dict({k: torch.as_tensor(v) for k, v in state.items()})
        except RuntimeError as exc:
            raise InputError(f"the auxiliary model's weights do not fit hidden={list(self.hidden)}, "
                             f"d={self.n_features_in_}: {str(exc).splitlines()[0]}") from None
        net.eval()
        for p in net.parameters():
            p.requires_grad_(False)
        self.net_ = net
        self.epochs_run_ = epochs_run
        with torch.no_grad():
            self.holdout_loss_ = float(self._loss(net(Xh), yh))
        self._set_quality(Xh, yh)
        return self

    def _train(self, net, opt, Xt, yt, Xh, yh, gen, batch_size, bar):
        """Epoch loop with early stopping on the held-out loss; returns (best state, epochs run, best loss)."""
        loss_fn = self._loss
        best, best_state, stale, epochs_run = float("inf"), None, 0, 0
        for epoch in range(self.epochs):
            net.train()
            perm = torch.randperm(len(Xt), generator=gen).to(Xt.device)   # drawn on the CPU: the same order anywhere
            for start in range(0, len(Xt), batch_size):
                idx = perm[start : start + batch_size]
                opt.zero_grad()
                loss = loss_fn(net(Xt[idx]), yt[idx])
                loss.backward()
                opt.step()
            net.eval()
            with torch.no_grad():
                hold_loss = float(loss_fn(net(Xh), yh))
            epochs_run = epoch + 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(holdout_loss=f"{hold_loss:.4f}")
            if hold_loss < best - 1e-5:
                best, stale = hold_loss, 0
                best_state = {key: v.clone() for key, v in net.state_dict().items()}
            else:
                stale += 1
                if stale >= self.patience:
                    break
        return best_state, epochs_run, best

    def _loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.kind == "binary":
            return nn.functional.binary_cross_entropy_with_logits(out[:, 0], y.float())
        if self.kind == "multiclass":
            return nn.functional.cross_entropy(out, y)
        return nn.functional.mse_loss(out[:, 0], y)

    def _set_quality(self, Xh: torch.Tensor, yh: torch.Tensor) -> None:
        from sklearn.metrics import r2_score, roc_auc_score

        with torch.no_grad():
            out = self.net_(Xh)
        y = yh.numpy()
        if self.kind == "binary":
            score = torch.sigmoid(out[:, 0]).double().numpy()
            self.quality_metric_ = "roc_auc"
            self.quality_ = float(roc_auc_score(y, score)) if len(np.unique(y)) == 2 else float("nan")
        elif self.kind == "multiclass":
            score = torch.softmax(out.double(), dim=1).numpy()
            self.quality_metric_ = "roc_auc_ovr_macro"
            try:
                self.quality_ = float(roc_auc_score(y, score, multi_class="ovr", average="macro",
                                                    labels=list(range(score.shape[1]))))
            except ValueError:
                self.quality_ = float("nan")
        else:
            score = out[:, 0].double().numpy()
            self.quality_metric_ = "r2"
            self.quality_ = float(r2_score(y, score))
        self.holdout_ = (y, score)

    # ------------------------------------------------------------------ using
    def _check_fitted(self) -> None:
        if not hasattr(self, "net_"):
            raise InputError("this AuxiliaryModel is not fitted yet; call fit(X, c) first")

    @property
    def n_jacobian_outputs(self) -> int:
        """k: rows of the Jacobian (1 for binary/continuous, m − 1 for m groups)."""
        self._check_fitted()
        mlp = getattr(self.net_, "mlp", None)
        if mlp is not None:
            return mlp[-1].out_features - (1 if self.kind == "multiclass" else 0)
        # a module given to from_module: probe its output width with one row
        if self.n_features_in_ is None:
            raise InputError("the auxiliary model's output count is unknown; pass n_features to from_module")
        with torch.no_grad():
            return int(self.outputs(torch.zeros(1, self.n_features_in_)).reshape(1, -1).shape[1])

    def outputs(self, x: torch.Tensor) -> torch.Tensor:
        """Differentiable aux outputs in ``output_space``; (b, d) -> (b, k). See class Notes."""
        self._check_fitted()
        raw = self.net_(x)
        if self.kind == "continuous":
            return raw
        if self.kind == "binary":
            return raw if self.output_space == "logit" else torch.sigmoid(raw)
        if self.output_space == "logit":
            return raw[:, 1:] - raw[:, :1]
        return torch.softmax(raw, dim=1)[:, 1:]

    def predict(self, X) -> np.ndarray:
        """Predicted group index (binary/multi-class) or value (continuous); shape (n,)."""
        self._check_fitted()
        with torch.no_grad():
            raw = self.net_(as_tensor(X))
        if self.kind == "continuous":
            return (raw[:, 0].double() * self.c_std_ + self.c_mean_).numpy()
        if self.kind == "binary":
            return (raw[:, 0] > 0).long().numpy()
        return raw.argmax(dim=1).numpy()

    def jacobian(self, X, *, chunk_size: int = 65_536) -> torch.Tensor:
        """Per-individual Jacobian of the aux outputs.

        Parameters
        ----------
        X : array or Tensor of shape (n, d)

        Returns
        -------
        Tensor of shape (n, k, d), float32
            In ``output_space`` units per unit of each encoded feature.
        """
        self._check_fitted()
        X = as_tensor(X)
        if self.n_features_in_ is not None and X.shape[1] != self.n_features_in_:
            raise InputError(f"X has {X.shape[1]} features but the auxiliary model was fitted on {self.n_features_in_}")
        return output_jacobian(self.outputs, X, chunk_size=chunk_size)

    def to_torchscript(self) -> torch.jit.ScriptModule:
        """The fitted network (raw outputs) as TorchScript, for the registry or ``--aux-model``."""
        self._check_fitted()
        return torch.jit.script(self.net_)

    @classmethod
    def from_module(cls, module, *, kind: Kind, output_space: OutputSpace = "logit",
                    groups: Sequence[str] = (), n_features: int | None = None) -> "AuxiliaryModel":
        """Wrap a given (e.g. TorchScript) auxiliary network with raw outputs; quality unknown (NaN)."""
        self = cls(kind=kind, output_space=output_space)
        module.eval()
        self.net_ = module
        self.groups_ = tuple(groups)
        self.quality_ = float("nan")
        self.quality_metric_ = "given"
        self.n_features_in_ = n_features
        self.epochs_run_ = 0
        self.c_mean_, self.c_std_ = 0.0, 1.0
        self.holdout_ = (np.array([]), np.array([]))
        self.holdout_rows_ = np.zeros(0, dtype=np.int64)
        return self

    def __repr__(self) -> str:
        q = f", {self.quality_metric_}={self.quality_:.3f}" if hasattr(self, "quality_") else ""
        return f"AuxiliaryModel(kind={self.kind!r}, output_space={self.output_space!r}{q})"


def holdout_split(n: int, holdout: float, rng: np.random.Generator, strata: np.ndarray | None):
    if not 0 < holdout < 1:
        raise InputError(f"holdout must be in (0, 1), got {holdout}")
    if strata is None:
        perm = rng.permutation(n)
        cut = max(1, int(round(n * holdout)))
        return np.sort(perm[cut:]), np.sort(perm[:cut])
    hold = []
    for s in np.unique(strata):
        idx = rng.permutation(np.flatnonzero(strata == s))
        hold.append(idx[: max(1, int(round(len(idx) * holdout)))])
    hold = np.sort(np.concatenate(hold))
    train = np.setdiff1d(np.arange(n), hold)
    return train, hold


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="epoch", leave=False)
