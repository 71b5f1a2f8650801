"""Prefect 3 flow: fAux scores of a large file, sharded over Dask workers.

Recipe for N ≥ 1 protected attributes (every step calls :mod:`faux_checks.gate.stream`; the attributes are
:func:`~faux_checks.gate.stream.passes.stream_attributes`):

1. plan shards: contiguous Parquet row-group ranges of about equal rows, ``shards_per_worker``
   per worker thread of the cluster (a CSV is first copied to Parquet with one row group per
   chunk, in one streaming pass: :func:`~faux_checks.gate.stream.source.csv_to_parquet`);
2. training samples in two rounds on the workers: the protected columns of each shard give each
   attribute's counts and bottom-k sample keys (:func:`~faux_checks.gate.stream.passes.key_pass`),
   merged into each attribute's global k-th smallest key; then each shard encodes only its rows of
   the global samples, once for every attribute (:func:`~faux_checks.gate.stream.passes.sample_pass`
   with ``max_keys``), merged exactly in the flow (:func:`~faux_checks.gate.stream.sample.merge_samples`).
   k rows per attribute cross the network in all, not k per shard;
3. train (or load) each attribute's auxiliary model once, on a worker, and save it as TorchScript in
   the work folder: every worker loads the same file; the extra aux seeds (``decision.aux_seeds``)
   train on other workers at the same time and go on while the shards score (:mod:`faux_checks_flows.shard_stages`);
4. score pass per shard on the workers, each chunk read and encoded once and scored for every
   attribute (:func:`~faux_checks.gate.stream.passes.score_pass`), each attribute writing its part
   file of its output dataset (``<out>/part-NNNNN.parquet``, :mod:`faux_checks.gate.stream.output`;
   a CSV output is concatenated from work-folder parts instead);
5. merge the counts (:meth:`~faux_checks.gate.stream.score.StreamCounts.merge`) and the seed spread,
   rename the dataset folders into place, and decide once
   (:func:`~faux_checks.gate.stream.outcome.summarize`).

The scores are those of :func:`faux_checks.gate.stream.run.score_stream` on the same file: the chunks
are the same (a chunk never crosses a row group) and so are the samples, the models and the per-row maths.

Task runner: ``prefect_dask.DaskTaskRunner`` with a local ``distributed.LocalCluster``
(``n_workers`` processes, ``threads_per_worker`` threads each) or a running scheduler at
``scheduler_address``; see :func:`faux_checks_flows.dask_runner.dask_task_runner` and :func:`faux_checks_flows.score_large.run_score_sharded`. The local
cluster's workers get the flow's Prefect API URL, so they do not each start a temporary server
(measured: +10 s and ~200 MB per worker otherwise). Workers of a remote scheduler need the data,
model and work-folder paths on a shared file system and ``PREFECT_API_URL`` set, and should be
started without Dask's ``MALLOC_TRIM_THRESHOLD_=65536`` (``distributed.nanny.pre-spawn-environ``):
it triples the CPU time of the score pass (:mod:`faux_checks_flows.dask_runner`).

Parameters are paths, settings and small dicts; tasks use no result cache (``NO_CACHE``).
Retries only on I/O (:func:`faux_checks_flows.common.retry_io_only`), never on bad input. The flow ends
``Failed`` when the decision is ``failed`` or ``undecided`` (docs/architecture.md, contracts), with the
:class:`~faux_checks.gate.stream.outcome.StreamResult` as the state's data either way.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.states import Completed, Failed

from faux_checks.report.artifacts import markdown_text

from .common import IO_TASK, run_logger
from .dask_runner import cluster_threads
from .shard_stages import finish_seeds, open_output, start_aux

__all__ = ["carried_spec", "plan_shards", "result_markdown", "score_sharded", "ShardResult", "summary_markdown"]


@dataclass
class ShardResult:
    """What a score task returns: the shard's counts, its part file and the worker's footprint."""

    row_groups: tuple[int, int]
    part_path: str  # the attributes' part files, comma-separated
    counts: dict  # attribute name -> faux_checks.gate.stream.score.StreamCounts
    seconds: float
    pid: int
    peak_rss_mb: float
    started_at: float = 0.0  # time.time() at the task's start (timeline in the provenance)


def plan_shards(row_group_rows, n_shards: int) -> list[tuple[int, int]]:
    """Split row groups into at most ``n_shards`` contiguous ranges of about equal row counts.

    Parameters
    ----------
    row_group_rows : sequence of int
        Rows per row group, in file order.

    Returns
    -------
    list of (start, stop)
        Row-group ranges ``start <= i < stop`` covering every row group once, in order.
    """
    sizes = list(row_group_rows)
    if not sizes:
        return []
    n_shards = max(1, min(int(n_shards), len(sizes)))
    total = sum(sizes)
    bounds, acc, start = [], 0, 0
    for i, size in enumerate(sizes):
        acc += size
        left_groups, left_shards = len(sizes) - (i + 1), n_shards - len(bounds) - 1
        if left_shards > 0 and (acc >= total * (len(bounds) + 1) / n_shards or left_groups == left_shards):
            bounds.append((start, i + 1))
            start = i + 1
    bounds.append((start, len(sizes)))
    return [b for b in bounds if b[0] < b[1]]


def _attributes(data_path: str, policy):
    """The data source and the policy's protected attributes (:func:`~faux_checks.gate.stream.passes.stream_attributes`)."""
    from faux_checks.gate.stream.passes import stream_attributes
    from faux_checks.gate.stream.source import DataSource

    source = DataSource.open(data_path)
    return source, stream_attributes(policy, source.columns)


@task(**IO_TASK)
def key_shard(data_path: str, policy, chunk_rows: int, row_groups: tuple[int, int]):
    """Every protected column of one shard: each attribute's counts, levels and bottom-k sample keys."""
    from faux_checks.gate.stream.passes import key_pass

    source, attributes = _attributes(data_path, policy)
    return key_pass(source, attributes, chunk_rows=chunk_rows, row_groups=row_groups)


@task(**IO_TASK)
def sample_shard(data_path: str, policy, feature_spec, chunk_rows: int, row_groups: tuple[int, int], max_keys: dict):
    """Sample pass over one shard: its rows of each attribute's global training sample (key <= max_keys[name]), encoded once."""
    from faux_checks.gate.stream.passes import sample_pass

    source, attributes = _attributes(data_path, policy)
    return sample_pass(source, attributes, feature_spec=feature_spec, chunk_rows=chunk_rows, row_groups=row_groups,
                       max_keys=max_keys)


@task(**IO_TASK)
def score_shard(model_path: str, aux_paths: dict, data_path: str, policy, plans: dict, row_groups: tuple[int, int],
                part_paths: dict, threads: int, allow_pickle: bool = False,
                trusted_types: tuple[str, ...] = ()) -> ShardResult:
    """Score pass over one shard for every attribute with the shared TorchScript aux models; one part file per attribute."""
    import torch

    from faux_checks.gate.stream.passes import score_pass
    from faux_checks.gate.stream.score import ScoresWriter, peak_rss_mb
    from faux_checks.inputs.models import load_model

    t0, started_at = time.perf_counter(), time.time()
    torch.set_num_threads(threads)
    target = load_model(model_path, allow_pickle=allow_pickle, trusted_types=trusted_types)
    auxes = {n: plans[n].wrap_aux(load_model(p, allow_pickle=allow_pickle)) for n, p in aux_paths.items()}
    source, attributes = _attributes(data_path, policy)
    writers = {}
    try:
        for name, path in part_paths.items():
            Path(path).unlink(missing_ok=True)  # a retried task starts its parts again
            Path(path + ".partial").unlink(missing_ok=True)
            writers[name] = ScoresWriter(path)
        counts = score_pass(target, auxes, source, plans, attributes, writers, row_groups=row_groups)
        for w in writers.values():
            w.commit()
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    return ShardResult(row_groups, ",".join(part_paths.values()), counts, time.perf_counter() - t0, os.getpid(),
                       peak_rss_mb(), started_at)


def carried_spec(model_path: str, trusted_types: tuple[str, ...]):
    """The feature spec a skops Pipeline brings (its ColumnTransformer), else None."""
    from faux_checks.inputs.formats import sniff_format

    if sniff_format(model_path) != "skops":
        return None
    from faux_checks.inputs.models import load_model

    return getattr(load_model(model_path, trusted_types=trusted_types), "feature_spec", None)


def _global_samples(source, policy, attributes, spec, chunk_rows: int, shards) -> dict:
    """Each attribute's training sample in two rounds on the workers (module docstring, step 2).

    Raises
    ------
    InputError
        An attribute with too many missing values (:func:`~faux_checks.gate.stream.plan.check_missing_protected`),
        prefixed with the attribute when several are checked.
    """
    from faux_checks.errors import InputError
    from faux_checks.gate.stream.plan import check_missing_protected
    from faux_checks.gate.stream.sample import merge_samples

    keyed = [f.result() for f in [key_shard.submit(source.path, policy, chunk_rows, rg) for rg in shards]]
    max_keys = {}
    for a in attributes:
        keys = merge_samples([k[a.name] for k in keyed])
        try:
            check_missing_protected(keys, a.policy)
        except InputError as exc:
            if len(attributes) == 1:
                raise
            raise InputError(f"protected attribute '{a.name}': {exc}") from exc
        max_keys[a.name] = keys.threshold  # None: fewer audited rows than max_train_rows, every one is in the sample
    del keyed
    pending = [sample_shard.submit(source.path, policy, spec, chunk_rows, rg, max_keys) for rg in shards]
    samples: dict = {}
    while pending:  # merge as parts arrive, releasing each: one part at a time in this process
        part = pending.pop(0).result()
        samples = {name: p if name not in samples else merge_samples([samples[name], p]) for name, p in part.items()}
        del part
    return samples


def _start_models(model_path: str, samples: dict, attributes, spec, aux_model_path: str | None, chunk_rows: int,
                  work: Path, allow_pickle: bool, trusted: tuple[str, ...]) -> dict:
    """Each attribute's auxiliary model trained (or loaded) on a worker, its extra seeds submitted beside it.

    Returns
    -------
    dict
        Attribute name -> ``(plan, aux model path, own fraction, seed futures)`` (:func:`~.shard_stages.start_aux`).
    """
    from faux_checks.errors import InputError
    from faux_checks.gate.sections import attribute_key

    started = {}
    for a in attributes:
        name = "aux_model.pt" if len(attributes) == 1 else f"aux_model.{attribute_key(a.name)}.pt"
        try:
            started[a.name] = start_aux(model_path, samples[a.name], a.policy, spec, aux_model_path, chunk_rows, work,
                                        allow_pickle, trusted, file_name=name)
        except InputError as exc:
            if len(attributes) == 1:
                raise
            raise InputError(f"protected attribute '{a.name}': {exc}") from exc
    return started


def _score_shards(model_path: str, source, policy, attributes, started: dict, outputs: dict, shards,
                  allow_pickle: bool, trusted: tuple[str, ...]) -> tuple[list[ShardResult], dict]:
    """The score pass on the workers, every attribute per shard; then the plans with their seed spread."""
    plans = {name: s[0] for name, s in started.items()}
    aux_paths = {name: s[1] for name, s in started.items()}
    futures = [score_shard.submit(model_path, aux_paths, source.path, policy, plans, rg,
                                  {a.name: outputs[a.name].parts[i] for a in attributes},
                                  policy.scale.threads_per_worker, allow_pickle, trusted)
               for i, rg in enumerate(shards)]
    results: list[ShardResult] = [f.result() for f in futures]
    return results, {name: finish_seeds(plan, own, seeds) for name, (plan, _, own, seeds) in started.items()}


def _merged_result(results: list[ShardResult], plans: dict, attributes, source, paths: dict, times: dict,
                   notes: list[str], model_info: dict):
    """The shards' counts merged per attribute and decided once (:func:`~faux_checks.gate.stream.outcome.summarize`),
    with the run's timings and the workers' footprint in the provenance."""
    from faux_checks.gate.stream.outcome import summarize
    from faux_checks.gate.stream.score import StreamCounts

    counts = {a.name: StreamCounts.merge([r.counts[a.name] for r in results]) for a in attributes}
    workers: dict[int, float] = {}
    for r in results:
        workers[r.pid] = max(workers.get(r.pid, 0.0), r.peak_rss_mb)
    first = min((c.first_score_at for c in counts.values() if c.first_score_at), default=None)
    t = times
    timings = {"plan": t["t1"] - t["t0"], "sample": t["t2"] - t["t1"], "aux": t["t3"] - t["t2"],
               "score": t["t4"] - t["t3"], "merge": t["t5"] - t["t4"], "total": t["t5"] - t["t0"],
               "first_score": (first - t["wall"]) if first else None, "shard_seconds": [r.seconds for r in results]}
    timeline = [{"row_groups": list(r.row_groups), "pid": r.pid, "start_s": r.started_at - t["wall"],
                 "seconds": r.seconds} for r in results]
    return summarize(counts, plans, attributes, source=source, out_paths=paths, timings=timings, extra_notes=notes,
                     model_info={**model_info, "worker_peak_rss_mb": workers, "shard_timeline": timeline})


@flow(name="fairness-score-sharded", log_prints=True)
def score_sharded(model_path: str, data_path: str, out_path: str, policy: dict | None = None,
                  feature_spec_path: str | None = None, aux_model_path: str | None = None,
                  chunk_rows: int | None = None, work_dir: str | None = None, allow_pickle: bool = False,
                  trusted_types: list[str] | None = None):
    """Score every row of a large Parquet/CSV file with fAux for every protected attribute, sharded over Dask workers.

    Parameters
    ----------
    model_path : str
        Target model file (TorchScript / torch.export), loaded by every worker.
    data_path : str
        Parquet (sharded by row groups) or CSV (copied to Parquet first).
    out_path : str
        New scores output, one row per input row, never overwritten: ``.parquet`` is a dataset folder of
        one part file per shard (input order when the parts are read by name:
        :func:`faux_checks.gate.stream.output.read_scores`); any other name one CSV file. A policy with
        ``[[attributes]]`` writes one output per attribute beside it (``scores.parquet`` ->
        ``scores.<key>.parquet``; :func:`faux_checks.gate.sections.attribute_paths`).
    policy : dict, optional
        A policy as ``Policy.model_dump(mode="json")`` (``protected = "..."`` or ``[[attributes]]``);
        the shipped default when omitted.
    feature_spec_path : str, optional
        FeatureSpec JSON; without it the numeric columns are used as they are.
    aux_model_path : str, optional
        TorchScript auxiliary model (raw outputs) instead of training one; one protected attribute only.
    chunk_rows : int, optional
        Rows per chunk (default ``policy.scale.chunk_rows``).
    work_dir : str, optional
        Folder for the aux models and the part files, visible to every worker; a new hidden folder
        next to ``out_path`` by default, removed at the end.

    Returns
    -------
    ``Completed`` (decision passed) or ``Failed`` (failed / undecided) state whose data is the
    :class:`~faux_checks.gate.stream.outcome.StreamResult`.

    Raises
    ------
    InputError
        Bad input (as :func:`faux_checks.gate.stream.run.score_stream`); an auxiliary model given
        for a policy with several attributes.
    """
    from faux_checks.gate.sections import attribute_paths

    logger = run_logger()
    t0, t_wall = time.perf_counter(), time.time()
    policy = _flow_policy(policy, aux_model_path)
    chunk_rows = int(chunk_rows or policy.scale.chunk_rows)
    out = Path(out_path)
    paths = attribute_paths(out, policy)
    own_work_dir = work_dir is None
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix=f".{out.name}.shards-", dir=out.parent))
    work.mkdir(parents=True, exist_ok=True)
    trusted = tuple(trusted_types or ())
    try:
        source, spec, attributes, notes = _sharded_source(data_path, policy, feature_spec_path, model_path, trusted,
                                                          chunk_rows=chunk_rows, work=work)
        slots, shards = _shard_plan(source, policy, len(attributes), notes, logger)
        t1 = time.perf_counter()
        samples = _global_samples(source, policy, attributes, spec, chunk_rows, shards)
        t2 = time.perf_counter()
        started = _start_models(model_path, samples, attributes, spec, aux_model_path, chunk_rows, work,
                                allow_pickle, trusted)
        del samples
        t3 = time.perf_counter()
        results, plans, t4 = _score_into_outputs(model_path, source, policy, attributes, started, paths, work, shards,
                                                 allow_pickle, trusted)
        t5 = time.perf_counter()
    finally:
        if own_work_dir:
            shutil.rmtree(work, ignore_errors=True)
    times = {"t0": t0, "t1": t1, "t2": t2, "t3": t3, "t4": t4, "t5": t5, "wall": t_wall}
    result = _merged_result(results, plans, attributes, source, paths, times, notes,
                            {"model_path": model_path, "shards": [list(s) for s in shards], "worker_threads": slots})
    return _flow_state(result, data_path, logger)


def _flow_policy(payload: dict | None, aux_model_path: str | None):
    """The flow's policy: ``payload`` as ``Policy.model_dump(mode="json")`` gives it, or the shipped default.

    Raises
    ------
    InputError
        One auxiliary model given for a policy with several attributes (each has its own).
    """
    from faux_checks.errors import InputError
    from faux_checks.gate.policy import Policy, load_policy

    policy = Policy.model_validate(payload) if payload is not None else load_policy()
    if aux_model_path and len(policy.attribute_names) > 1:
        raise InputError(f"one auxiliary model given, but the policy checks {', '.join(policy.attribute_names)}, "
                         "each with its own; drop the auxiliary model")
    return policy


def _sharded_source(data_path: str, policy, feature_spec_path: str | None, model_path: str, trusted: tuple[str, ...],
                    *, chunk_rows: int, work: Path):
    """The source and how it is read (module docstring, step 1): the feature spec (the given file, the one a skops
    Pipeline carries, or the numeric columns), every row checked against it as in one process, the attributes, and a
    CSV copied to Parquet in the work folder (one row group per chunk) so that it can be sharded.

    Returns ``(source, spec, attributes, notes)``; raises InputError as
    :func:`faux_checks.gate.stream.run.score_stream` does.
    """
    from faux_checks.gate.stream.passes import stream_attributes, stream_columns
    from faux_checks.gate.stream.plan import resolve_feature_spec
    from faux_checks.gate.stream.source import DataSource, check_rows, csv_to_parquet
    from faux_checks.inputs.tabular import FeatureSpec

    source = DataSource.open(data_path)
    spec = resolve_feature_spec(source, policy, FeatureSpec.load(feature_spec_path) if feature_spec_path else
                                carried_spec(model_path, trusted), chunk_rows=chunk_rows)
    check_rows(source, spec, chunk_rows=max(chunk_rows, 65_536))   # the same first rows named as in one process
    attributes = stream_attributes(policy, source.columns)
    notes = []
    if source.format == "csv":
        source = csv_to_parquet(source, work / "data.parquet", columns=stream_columns(spec, attributes),
                                chunk_rows=chunk_rows)
        notes.append(f"CSV copied to Parquet ({source.n_row_groups} row groups of {chunk_rows:,} rows) to shard it")
    return source, spec, attributes, notes


def _shard_plan(source, policy, n_attributes: int, notes: list[str], logger) -> tuple[int, list[tuple[int, int]]]:
    """The cluster's worker threads and the shards (:func:`plan_shards`, ``shards_per_worker`` per thread); a note
    when the file has too few row groups to use every worker."""
    from prefect.context import FlowRunContext

    slots = cluster_threads(FlowRunContext.get())
    shards = plan_shards(source.row_group_rows, slots * policy.scale.shards_per_worker)
    if len(shards) < slots:
        notes.append(f"{len(shards)} shard(s) for {slots} worker thread(s): the file has {source.n_row_groups} row "
                     "group(s); write it with smaller row groups to use every worker")
    logger.info("%s: %s rows in %d row groups -> %d shards on %d worker thread(s), %d protected attribute(s)",
                source.path, f"{source.n_rows:,}", source.n_row_groups, len(shards), slots, n_attributes)
    return slots, shards


def _score_into_outputs(model_path: str, source, policy, attributes, started: dict, paths: dict, work: Path, shards,
                        allow_pickle: bool, trusted: tuple[str, ...]) -> tuple[list[ShardResult], dict, float]:
    """The score pass (:func:`_score_shards`) into each attribute's output: a Parquet dataset whose parts the workers
    write in place, or a CSV merged from its parts; every output is aborted when a shard fails. Returns the shards'
    results, the plans and the time the scores ended (``time.perf_counter``)."""
    from faux_checks.gate.sections import attribute_key

    outputs = {}    # a Parquet output is a dataset whose parts the workers write in place; a CSV merges its parts
    try:
        for a in attributes:
            folder = work if len(attributes) == 1 else work / attribute_key(a.name)
            folder.mkdir(exist_ok=True)
            outputs[a.name] = open_output(paths[a.name], folder, len(shards))
        results, plans = _score_shards(model_path, source, policy, attributes, started, outputs, shards,
                                       allow_pickle, trusted)
        scored = time.perf_counter()
        for output in outputs.values():
            output.finish()
    except BaseException:
        for output in outputs.values():
            output.abort()
        raise
    return results, plans, scored


def _flow_state(result, data_path: str, logger):
    """The flow's end state: ``Completed`` when the decision is passed, ``Failed`` otherwise, with the result as its
    data; the result as the Markdown artifact and the log line."""
    create_markdown_artifact(key="fairness-score-sharded", markdown=result_markdown(result),
                             description=f"sharded fAux scores of {markdown_text(data_path)}")
    logger.info("%r", result)
    if result.decision != "passed":
        return Failed(message=repr(result), data=result)
    return Completed(message=repr(result), data=result)


def result_markdown(result) -> str:
    """The run's Markdown artifact: a :class:`~faux_checks.gate.stream.outcome.StreamResult` (one section per
    attribute under its decision) or one attribute's :class:`~faux_checks.gate.stream.summary.StreamSummary`."""
    sections = getattr(result, "sections", None)
    if sections is None:
        return summary_markdown(result)
    return "\n\n".join([f"## sharded fAux scores, {len(sections)} protected attributes: "
                         f"**{markdown_text(result.decision)}**", *[f"- {markdown_text(r)}" for r in result.reasons],
                         *[f"### {markdown_text(s.attribute)}\n\n" + summary_markdown(s.summary) for s in sections]])


def summary_markdown(s) -> str:
    """One attribute's Markdown section; reasons, paths and group values are escaped (no raw HTML from the data)."""
    md = markdown_text
    lines = [f"## sharded fAux scores: **{md(s.decision)}**", "", f"- {md(repr(s))}", f"- scores: {md(s.out_path)}",
             f"- rows: {s.n_rows:,}, undefined: {s.n_undefined:,}, missing protected: {s.n_missing_protected:,}",
             "- timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in s.timings.items() if isinstance(v, float)),
             "", "Reasons:", *[f"- {md(r)}" for r in s.reasons]]
    if len(s.by_group):
        lines += ["", "| group | n | flagged | flagged fraction | undefined |", "|---|---|---|---|---|"]
        lines += [f"| {md(g)} | {r.n:,} | {r.flagged:,} | {r.flagged_fraction:.4f} | {r.undefined:,} |"
                  for g, r in s.by_group.iterrows()]
    return "\n".join(lines)
