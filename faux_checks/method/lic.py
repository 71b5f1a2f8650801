"""The fAux Local Independence Criterion scores: pure functions on tensors.

Source: Castiglione, Wu, Srinivasa, Prince, "fAux: Testing Individual Fairness via Gradient
Alignment", arXiv 2210.06288 (2022). Equation numbers are the paper's; choices where the paper
is silent are ours and are marked "our choice" with the open point of docs/method.md they settle.

Shapes: n individuals, d encoded features, k auxiliary-model outputs.
``g`` (n, d) is the input gradient of the target probability, ``J`` (n, k, d) the Jacobian
of the auxiliary model's outputs. Every function returns finite values for defined rows and
marks the others in an ``undefined`` mask (their score is NaN); none ever returns a silent 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import InputError

__all__ = [
    "LICScores",
    "faux_scores",
    "faux_ng_scores",
    "faux_projection_scores",
    "lic_upper_bound",
    "pseudo_inverse_rows",
    "RCOND",
]

#: Rows whose Gram matrix JJᵀ has eigenvalue ratio below this (with no ridge) are undefined.
RCOND = 1e-10
#: Aux gradients with squared norm at or below this are treated as exactly zero.
ZERO_NORM2 = 1e-30


@dataclass(frozen=True)
class LICScores:
    """Per-individual output of a LIC scorer.

    Attributes
    ----------
    scores : Tensor of shape (n,), float64
        ‖·‖_∞ of the estimated ∂f_tar/∂c; NaN exactly where ``undefined``.
    components : Tensor of shape (n, k), float64
        The vector whose max-abs is the score (signed), NaN where undefined.
    evidence : Tensor of shape (n, d), float64, or None
        Per-feature terms of the largest component; they sum to that (signed) component.
        None when the scorer was asked for no evidence.
    undefined : Tensor of shape (n,), bool
        Rows where the score cannot be computed (zero aux gradient, ill-conditioned JJᵀ without
        ridge, non-finite gradients).
    """

    scores: torch.Tensor
    components: torch.Tensor
    evidence: torch.Tensor
    undefined: torch.Tensor


def _check_shapes(g: torch.Tensor, J: torch.Tensor) -> None:
    if g.ndim != 2 or J.ndim != 3:
        raise InputError(f"expected g of shape (n, d) and J of shape (n, k, d); got {tuple(g.shape)} and {tuple(J.shape)}")
    if g.shape[0] != J.shape[0] or g.shape[1] != J.shape[2]:
        raise InputError(
            f"g has shape {tuple(g.shape)} but J has shape {tuple(J.shape)}: row counts and d must agree"
        )


def pseudo_inverse_rows(J: torch.Tensor, *, ridge: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of the damped minimum-norm pseudo-inverse, M = (JJᵀ + λI)⁻¹ J, so J⁺ = Mᵀ.

    Parameters
    ----------
    J : Tensor of shape (n, k, d)
    ridge : float
        λ ≥ 0, in squared aux-output units per squared feature unit. λ = 0 is eq. 7-8 exactly.

    Returns
    -------
    M : Tensor of shape (n, k, d), float64
        NaN rows where undefined.
    undefined : Tensor of shape (n,), bool
        Zero or non-finite J, or (λ = 0) JJᵀ with eigenvalue ratio below ``RCOND``.

    Notes
    -----
    fAux eq. 7-8 (J⁺ = Jᵀ(JJᵀ)⁻¹), solved as a batched k×k system in float64 (no ``pinv`` on
    the hot path; 15× faster, docs/stack.md). Damping and the undefined rule: docs/method.md,
    open point 2 (our choice).
    """
    J64, system, undefined = _damped_gram(J, ridge=ridge)
    k = J64.shape[1]
    if k == 1:
        M = J64 / system                                                # (n, 1, d)
    else:
        M = torch.linalg.solve(system, J64)                             # (n, k, d)
    M = torch.where(undefined[:, None, None], torch.full((), float("nan"), dtype=torch.float64), M)
    return M, undefined


def _damped_gram(J: torch.Tensor, *, ridge: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """J in float64 (non-finite rows zeroed), the system JJᵀ + λI (n, k, k) with undefined rows
    replaced by the identity, and the undefined mask (n,) (see :func:`pseudo_inverse_rows`)."""
    if ridge < 0:
        raise InputError(f"ridge must be >= 0, got {ridge}")
    J64 = J.double()
    n, k, d = J64.shape
    finite = torch.isfinite(J64).flatten(1).all(dim=1)
    J64 = torch.where(finite[:, None, None], J64, torch.zeros((), dtype=torch.float64, device=J64.device))
    gram = J64 @ J64.transpose(1, 2)                                    # (n, k, k)
    row_norm2 = torch.diagonal(gram, dim1=1, dim2=2)                    # (n, k)
    undefined = ~finite | (row_norm2 <= ZERO_NORM2).all(dim=1)          # (n,)
    if k > 1 and ridge == 0:
        eig = torch.linalg.eigvalsh(gram)                               # (n, k) ascending
        undefined = undefined | (eig[:, 0] <= RCOND * eig[:, -1].clamp(min=ZERO_NORM2))
    eye = torch.eye(k, dtype=torch.float64)
    system = torch.where(undefined[:, None, None], eye.expand(n, k, k), gram + ridge * eye)
    return J64, system, undefined


def _scores_from_components(components: torch.Tensor, terms: torch.Tensor | None, undefined: torch.Tensor) -> LICScores:
    """components (n, k), per-feature terms (n, k, d) or None -> LICScores with evidence of the max row."""
    filled = torch.where(undefined[:, None], torch.zeros((), dtype=components.dtype, device=components.device), components)
    top = filled.abs().argmax(dim=1)                                     # (n,)
    nan = torch.full((), float("nan"), dtype=torch.float64)
    scores = filled.abs().amax(dim=1) if filled.shape[1] else torch.zeros(filled.shape[0], dtype=filled.dtype)
    if terms is None:
        return LICScores(scores=torch.where(undefined, nan, scores),
                         components=torch.where(undefined[:, None], nan, components),
                         evidence=None, undefined=undefined)
    evidence = terms[torch.arange(terms.shape[0]), top]                  # (n, d)
    return LICScores(
        scores=torch.where(undefined, nan, scores),
        components=torch.where(undefined[:, None], nan, components),
        evidence=torch.where(undefined[:, None], nan, evidence),
        undefined=undefined,
    )


def faux_scores(
    g: torch.Tensor,
    J: torch.Tensor,
    *,
    ridge: float = 0.0,
    direct: torch.Tensor | None = None,
    evidence: bool = True,
) -> LICScores:
    """Return the fAux LIC score ‖g · J⁺‖_∞ of each individual (eq. 9).

    For k = 1 this is |⟨g, a⟩| / (‖a‖² + λ) with a the aux gradient: the first-order change of
    the target probability when the input moves along the minimum-norm direction that changes
    the aux output by one unit.

    Parameters
    ----------
    g : Tensor of shape (n, d)
        Input gradient of the target probability.
    J : Tensor of shape (n, k, d)
        Jacobian of the auxiliary model's k outputs (the output space is the caller's choice:
        logit or probability, docs/method.md, open point 1).
    ridge : float
        Damping λ ≥ 0 added to JJᵀ (see :func:`pseudo_inverse_rows`).
    direct : Tensor of shape (n, k), optional
        Direct term ∂f_tar/∂x_c · ∂x_c/∂c when c's own columns are target inputs (docs/method.md,
        "The direct term"); added to the indirect estimate before the max-abs.
    evidence : bool
        Build the (n, d) per-feature evidence. Without it the (n, k, d) pseudo-inverse is never
        formed: the k×k system is solved for J·g directly (about half the cost of the LIC step).

    Returns
    -------
    LICScores
        Scores in change of ŷ per unit change of the aux output; evidence (n, d) holds
        gᵢ·(J⁺)ᵢ for the largest component (the direct term is not in it).

    Raises
    ------
    InputError
        If shapes disagree (the message gives both).

    Notes
    -----
    Castiglione et al. 2022, fAux eq. 9 (arXiv 2210.06288).

    Examples
    --------
    >>> faux_scores(torch.ones(3, 5), torch.ones(3, 1, 5)).scores
    tensor([1., 1., 1.], dtype=torch.float64)
    """
    _check_shapes(g, J)
    g64 = g.double()
    if evidence:
        M, undefined = pseudo_inverse_rows(J, ridge=ridge)              # (n, k, d)
        terms = M * g64[:, None, :]                                      # (n, k, d): g_i (J⁺)_{i,j}
        components = terms.sum(dim=2)                                    # (n, k) = g · J⁺
    else:
        J64, system, undefined = _damped_gram(J, ridge=ridge)
        Jg = torch.bmm(J64, g64[:, :, None])                             # (n, k, 1)
        components = (Jg / system if J64.shape[1] == 1 else torch.linalg.solve(system, Jg))[:, :, 0]  # (n, k)
        terms = None
    undefined = undefined | ~torch.isfinite(g64).all(dim=1)
    if direct is not None:
        if direct.shape != components.shape:
            raise InputError(f"direct term has shape {tuple(direct.shape)}, expected {tuple(components.shape)}")
        components = components + direct.double()
    return _scores_from_components(components, terms, undefined)


def faux_projection_scores(g: torch.Tensor, J: torch.Tensor, *, direct: torch.Tensor | None = None) -> LICScores:
    """Return the projection score max_j |⟨g, a_j⟩| / ‖a_j‖ = ‖g‖·|cos(g, a_j)| (our reading of Fig. 1).

    The target's sensitivity along the unit direction in which the auxiliary model's j-th
    output changes fastest. Small when *either* gradient is small or they are orthogonal, as
    the paper's Figure 1 describes, and, unlike eq. 9, independent of the aux output's scale
    (so an under-trained aux with small logit slopes does not inflate it; docs/method.md, open point 3).

    Parameters
    ----------
    g : Tensor of shape (n, d)
    J : Tensor of shape (n, k, d)
    direct : Tensor of shape (n, k), optional
        Direct term (per unit change of c's own encoded features) added before the max-abs.

    Returns
    -------
    LICScores
        Scores in change of ŷ per unit move of x (in encoded-feature units) along â_j; a row
        whose aux gradient is zero in every output is undefined.

    Notes
    -----
    Our reconstruction (not an equation of Castiglione et al. 2022); evidence for it against
    eq. 9 on the synthetic ground-truth benchmark is in docs/benchmark.md.
    """
    _check_shapes(g, J)
    g64, J64 = g.double(), J.double()
    finite = torch.isfinite(g64).all(dim=1) & torch.isfinite(J64).flatten(1).all(dim=1)
    g64 = torch.where(finite[:, None], g64, torch.zeros((), dtype=torch.float64, device=g64.device))
    J64 = torch.where(finite[:, None, None], J64, torch.zeros((), dtype=torch.float64, device=J64.device))
    row_norm = J64.norm(dim=2)                                           # (n, k)
    undefined = ~finite | (row_norm.pow(2) <= ZERO_NORM2).all(dim=1)
    J_unit = J64 / torch.where(row_norm > 0, row_norm, torch.ones_like(row_norm))[:, :, None]
    terms = J_unit * g64[:, None, :]                                     # (n, k, d)
    components = terms.sum(dim=2)                                        # (n, k)
    if direct is not None:
        if direct.shape != components.shape:
            raise InputError(f"direct term has shape {tuple(direct.shape)}, expected {tuple(components.shape)}")
        components = components + direct.double()
    return _scores_from_components(components, terms, undefined)


def faux_ng_scores(g: torch.Tensor, J: torch.Tensor, *, direct: torch.Tensor | None = None) -> LICScores:
    """Return the fAux+NG score ‖norm(g) · norm(J)ᵀ‖_∞ (eq. 10): gradient alignment.

    For k = 1 the absolute cosine between g and the aux gradient; for k > 1 the max over the
    k rows of J. Scale-free, in [0, 1].

    Parameters
    ----------
    g : Tensor of shape (n, d)
    J : Tensor of shape (n, k, d)
    direct : Tensor of shape (n, k), optional
        Not defined for a cosine; passing one raises InputError (use :func:`faux_scores`).

    Returns
    -------
    LICScores
        A row with g = 0 (target locally flat) scores 0 and is defined; a row whose aux
        gradient is zero in every output is undefined.

    Notes
    -----
    Castiglione et al. 2022, fAux+NG, eq. 10.
    """
    _check_shapes(g, J)
    if direct is not None:
        raise InputError("the NG variant has no direct term; use variant 'faux' when c is a target input")
    g64, J64 = g.double(), J.double()
    finite = torch.isfinite(g64).all(dim=1) & torch.isfinite(J64).flatten(1).all(dim=1)
    g64 = torch.where(finite[:, None], g64, torch.zeros((), dtype=torch.float64, device=g64.device))
    J64 = torch.where(finite[:, None, None], J64, torch.zeros((), dtype=torch.float64, device=J64.device))
    g_norm = g64.norm(dim=1)                                             # (n,)
    row_norm = J64.norm(dim=2)                                           # (n, k)
    undefined = ~finite | (row_norm.pow(2) <= ZERO_NORM2).all(dim=1)
    g_unit = g64 / torch.where(g_norm > 0, g_norm, torch.ones_like(g_norm))[:, None]
    J_unit = J64 / torch.where(row_norm > 0, row_norm, torch.ones_like(row_norm))[:, :, None]
    terms = J_unit * g_unit[:, None, :]                                  # (n, k, d)
    return _scores_from_components(terms.sum(dim=2), terms, undefined)


def lic_upper_bound(g: torch.Tensor, dx_dc: torch.Tensor) -> torch.Tensor:
    """LIC-UB: ‖g · ∂x/∂c‖_∞ with the data generator's true ∂x/∂c (eq. 5; synthetic data only).

    Parameters
    ----------
    g : Tensor of shape (n, d)
    dx_dc : Tensor of shape (d, k) or (n, d, k)
        True derivative of the features with respect to c.

    Returns
    -------
    Tensor of shape (n,), float64
    """
    g64 = g.double()
    D = dx_dc.double()
    if D.ndim == 1:
        D = D[:, None]
    if D.ndim == 2:
        if D.shape[0] != g64.shape[1]:
            raise InputError(f"dx_dc has shape {tuple(D.shape)} but g has d = {g64.shape[1]}")
        comp = g64 @ D                                                   # (n, k)
    else:
        if D.shape[:2] != g64.shape:
            raise InputError(f"dx_dc has shape {tuple(D.shape)} but g has shape {tuple(g64.shape)}")
        comp = torch.einsum("nd,ndk->nk", g64, D)
    return comp.abs().amax(dim=1)
