"""Stages of the sharded flow (:mod:`faux_checks_flows.shard`) that keep its driver free of serial work.

- :func:`start_aux`: the auxiliary model trains **on a worker** (task :func:`prepare_task`), and each extra aux
  seed on a worker of its own (task :func:`seed_task`), submitted together: the driver only waits for the
  check's own model, then submits the shards, which score while the extra seeds still train. With ``w`` workers
  and ``s`` seeds the wait before the first shard is one training, not ``s``; :func:`finish_seeds` collects the
  seed spread when the shards are done.
- :func:`open_output`: a ``.parquet`` output is a partitioned dataset (:class:`~faux_checks.gate.stream.output.ScoresDataset`)
  whose part files the score tasks write in place; nothing is merged at the end. A CSV output keeps its serial
  concatenation (:func:`~faux_checks.gate.stream.score.merge_score_parts`).
"""

from __future__ import annotations

from pathlib import Path

from prefect import task

from .common import IO_TASK, TASK

__all__ = ["Output", "finish_seeds", "open_output", "prepare_task", "seed_task", "start_aux"]


@task(**TASK)
def prepare_task(model_path: str, sample, policy, feature_spec, aux_model_path: str | None, chunk_rows: int,
                 work_dir: str, allow_pickle: bool = False, trusted_types: tuple[str, ...] = (),
                 file_name: str = "aux_model.pt"):
    """Train (or load) one attribute's own aux model on its merged sample, on a worker; save it as TorchScript
    (``work_dir/file_name``).

    Returns ``(plan, aux model path, own fraction)`` (:func:`~faux_checks.gate.stream.aux_seeds.prepare_primary`).
    """
    from faux_checks.gate.stream.aux_seeds import prepare_primary
    from faux_checks.inputs.models import load_model

    target = load_model(model_path, allow_pickle=allow_pickle, trusted_types=trusted_types)
    given = load_model(aux_model_path, allow_pickle=allow_pickle) if aux_model_path else None
    plan, aux, own = prepare_primary(target, sample, policy=policy, feature_spec=feature_spec, aux_model=given,
                                     chunk_rows=chunk_rows)
    if aux_model_path:
        return plan, aux_model_path, own
    import torch

    path = str(Path(work_dir) / file_name)
    torch.jit.save(aux.to_torchscript(), path)
    return plan, path, own


@task(**TASK)
def seed_task(model_path: str, sample, policy, feature_spec, k: int, allow_pickle: bool = False,
              trusted_types: tuple[str, ...] = ()) -> tuple[float, float]:
    """Extra aux seed ``policy.seed + k`` on the sample, on a worker: ``(flagged fraction, aux quality)``."""
    from faux_checks.gate.stream.aux_seeds import extra_seed
    from faux_checks.inputs.models import load_model

    target = load_model(model_path, allow_pickle=allow_pickle, trusted_types=trusted_types)
    return extra_seed(target, sample, policy=policy, feature_spec=feature_spec, k=k)


def start_aux(model_path: str, sample, policy, spec, aux_model_path: str | None, chunk_rows: int, work: Path,
              allow_pickle: bool, trusted: tuple[str, ...], file_name: str = "aux_model.pt"):
    """Submit one attribute's aux training and its extra seeds; wait for its own model only.

    ``policy`` and ``sample`` are the attribute's (:meth:`~faux_checks.gate.policy.Policy.attribute_policies`).

    Returns
    -------
    (plan, aux_path, own_fraction, seed_futures)
        Pass the last two to :func:`finish_seeds` after the shards.
    """
    from faux_checks.gate.stream.aux_seeds import extra_seed_count

    own = prepare_task.submit(model_path, sample, policy, spec, aux_model_path, chunk_rows, str(work), allow_pickle,
                              trusted, file_name)
    seeds = [seed_task.submit(model_path, sample, policy, spec, k, allow_pickle, trusted)
             for k in range(1, 1 + extra_seed_count(policy, aux_model_path))]
    plan, aux_path, own_fraction = own.result()
    return plan, aux_path, own_fraction, seeds


def finish_seeds(plan, own_fraction, seed_futures):
    """The plan with the seed spread of the extra seeds (waits for them; they ran beside the shards)."""
    from faux_checks.gate.stream.aux_seeds import with_seeds

    return with_seeds(plan, own_fraction, [f.result() for f in seed_futures])


class Output:
    """Where the score tasks write: the dataset's part files (``.parquet``), or work-folder parts merged into a CSV.

    Parameters
    ----------
    out : Path
        The user's output path (checked not to exist by the flow; never overwritten).
    work : Path
        The run's work folder (CSV parts).
    n_shards : int
    """

    def __init__(self, out: Path, work: Path, n_shards: int):
        from faux_checks.gate.stream.output import ScoresDataset, is_dataset_output

        self.out, self.n = Path(out), int(n_shards)
        self.dataset = ScoresDataset(out) if is_dataset_output(out) else None
        self.parts = ([self.dataset.part_path(i) for i in range(self.n)] if self.dataset is not None
                      else [str(Path(work) / f"part-{i:05d}.parquet") for i in range(self.n)])

    def finish(self) -> str:
        """Commit the dataset (a rename), or concatenate the CSV parts (serial); return the output path."""
        if self.dataset is not None:
            return str(self.dataset.commit(self.n))
        return merge_parts(self.parts, str(self.out))

    def abort(self) -> None:
        if self.dataset is not None:
            self.dataset.abort()


def open_output(out: Path, work: Path, n_shards: int) -> Output:
    """The run's :class:`Output` (creates ``<out>.partial/`` for a dataset)."""
    return Output(out, work, n_shards)


@task(**IO_TASK)
def merge_parts(part_paths: list[str], out_path: str) -> str:
    """Concatenate the shard part files, in shard order, into one CSV scores file."""
    from faux_checks.gate.stream.score import merge_score_parts

    return str(merge_score_parts(part_paths, out_path))
