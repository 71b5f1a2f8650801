"""``score-large`` on a Dask cluster: the sharded flow for the policy's N ≥ 1 attributes, run on a task runner from ``[scale]``.

:func:`faux_checks_flows.shard.score_sharded` scores every protected attribute of the policy in one pass; this module
imports from there downward only.
"""

from __future__ import annotations

from .dask_runner import dask_task_runner
from .shard import score_sharded

__all__ = ["run_score_sharded"]


def run_score_sharded(model_path, data_path, out_path, *, policy=None, feature_spec_path=None, aux_model_path=None,
                      workers: int | None = None, scheduler_address: str | None = None, chunk_rows: int | None = None,
                      work_dir: str | None = None, allow_pickle: bool = False, trusted_types=()):
    """Run :func:`score_sharded` on a Dask task runner built from the settings; return its result.

    ``workers``, ``scheduler_address`` and ``chunk_rows`` default to the policy's ``[scale]``.
    ``trusted_types``: skops types the user reviewed (CLI ``--trust-type``), trusted when the model loads.

    Returns
    -------
    faux_checks.gate.stream.outcome.StreamResult
        One section per protected attribute (one scores output each), one decision.

    Raises
    ------
    InputError
        Bad input, raised by a task (the flow's exception is re-raised here).
    """
    from faux_checks.gate.policy import Policy, load_policy

    policy = policy if isinstance(policy, Policy) else (Policy.model_validate(policy) if policy else load_policy())
    scale = policy.scale
    runner = dask_task_runner(workers=workers if workers is not None else scale.workers,
                              threads_per_worker=scale.threads_per_worker,
                              scheduler_address=scheduler_address or scale.scheduler_address)
    state = score_sharded.with_options(task_runner=runner)(
        model_path=str(model_path), data_path=str(data_path), out_path=str(out_path),
        policy=policy.model_dump(mode="json"), feature_spec_path=str(feature_spec_path) if feature_spec_path else None,
        aux_model_path=str(aux_model_path) if aux_model_path else None, chunk_rows=chunk_rows,
        work_dir=work_dir, allow_pickle=allow_pickle, trusted_types=list(trusted_types or ()), return_state=True)
    result = state.result(raise_on_failure=False)
    if isinstance(result, BaseException):
        raise result
    return result
