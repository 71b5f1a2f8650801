"""The permutation test of the holds: the first-layer update for a wide AuxNet reads what one forward per group reads."""

from __future__ import annotations

import numpy as np
import torch

from faux_checks.method.auxiliary import AuxNet
from faux_checks.method.held import uninformative_features


def _rows(kind: str, n: int = 3000, d: int = 40, seed: int = 0):
    """c moves the first 4 features by 0.5 sd (binary), by 0.5·c (3-class) or 0.5·c (continuous); the rest is noise."""
    rng = np.random.default_rng(seed)
    c = (rng.integers(0, 2, n) if kind == "binary" else rng.integers(0, 3, n) if kind == "multiclass"
         else rng.standard_normal(n))
    X = rng.standard_normal((n, d)).astype(np.float32)
    X[:, :4] += 0.5 * np.asarray(c, dtype=np.float32)[:, None]
    return X, c


def _trained_net(X, c, kind: str, k: int) -> AuxNet:
    """A few hundred full-batch Adam steps: the 4 carrying features get large weights, the others small ones."""
    torch.manual_seed(0)
    net = AuxNet(X.shape[1], k, (8, 8), torch.zeros(X.shape[1]), torch.ones(X.shape[1]))
    opt = torch.optim.Adam(net.parameters(), lr=0.02)
    x = torch.from_numpy(X)
    for _ in range(200):
        opt.zero_grad()
        out = net(x)
        if kind == "binary":
            loss = torch.nn.functional.binary_cross_entropy_with_logits(out[:, 0], torch.as_tensor(c, dtype=torch.float32))
        elif kind == "multiclass":
            loss = torch.nn.functional.cross_entropy(out, torch.as_tensor(c))
        else:
            loss = ((out[:, 0] - torch.as_tensor((c - c.mean()) / c.std(), dtype=torch.float32)) ** 2).mean()
        loss.backward()
        opt.step()
    return net.eval()


def test_a_narrow_net_reads_the_full_forward_bit_for_bit():
    X, c = _rows("binary", d=6)
    net = AuxNet(6, 1, (8,), torch.zeros(6), torch.ones(6)).eval()            # d ≤ width: no first-layer update
    _, ours = uninformative_features(net, X, c, kind="binary", groups=[[j] for j in range(6)])
    _, plain = uninformative_features(lambda x: net(x), X, c, kind="binary", groups=[[j] for j in range(6)])
    assert ours == plain


def test_the_update_gives_the_same_holds_and_z_as_one_forward_per_group():
    for kind, k in (("binary", 1), ("multiclass", 3), ("continuous", 1)):
        net = _trained_net(*_rows(kind, seed=0), kind, k)
        X, c = _rows(kind, seed=1)                                            # held-out rows
        groups = [[0, 1], *[[j] for j in range(2, X.shape[1])]]               # a two-column group too
        fast_mask, fast = uninformative_features(net, X, c, kind=kind, groups=groups, seed=3)
        slow_mask, slow = uninformative_features(net.forward.__call__, X, c, kind=kind, groups=groups, seed=3)
        assert fast_mask.tolist() == slow_mask.tolist(), kind
        assert not fast_mask[:4].any() and fast_mask[4:].sum() >= 30, (kind, fast_mask)   # the carriers move
        np.testing.assert_allclose([r["z"] for r in fast], [r["z"] for r in slow], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose([r["loss_increase"] for r in fast], [r["loss_increase"] for r in slow],
                                   rtol=1e-4, atol=1e-7)
