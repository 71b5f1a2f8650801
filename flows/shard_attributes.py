"""Prefect 3 flow: sharded fAux scores for a policy with several protected attributes.

The recipe of :func:`faux_checks_flows.shard.score_sharded`, every step over all the attributes at once
(:mod:`faux_checks.gate.stream.attributes`):

1. plan shards (:func:`faux_checks_flows.shard.plan_shards`; a CSV is first copied to Parquet);
2. round 1 per shard: every protected column read once, each attribute's counts and bottom-k keys
   (:func:`~faux_checks.gate.stream.attributes.key_pass_attributes`), merged per attribute into its
   global threshold; round 2 per shard: each attribute's rows of its global sample, encoded once
   (:func:`~faux_checks.gate.stream.attributes.sample_pass_attributes`), merged per attribute;
3. one auxiliary model per attribute, trained in the flow's process and saved as TorchScript
   (``aux_model.<key>.pt``) for the workers;
4. score pass per shard: each chunk read and encoded once, scored for every attribute, one part
   file per attribute (:func:`~faux_checks.gate.stream.attributes.score_pass_attributes`);
5. the parts concatenated per attribute into ``<stem>.<key><suffix>``, the counts merged, and one
   decision over the prefixed rules (:func:`~faux_checks.gate.stream.attributes.summarize_attributes`).

Each attribute's scores equal :func:`~faux_checks.gate.stream.attributes.score_stream_attributes`
on the same file (same chunks, same samples, same models). The flow ends ``Failed`` unless the
decision is ``passed``, with the :class:`~faux_checks.gate.stream.attributes.StreamAttributesResult`
as the state's data either way.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.states import Completed, Failed

from faux_checks.report.artifacts import markdown_text

from .common import IO_TASK, TASK, run_logger
from .shard import ShardResult, carried_spec, cluster_threads, summary_markdown, plan_shards
from .shard_stages import open_output

__all__ = ["score_sharded_attributes"]


def _attributes(data_path: str, policy):
    from faux_checks.gate.stream.attributes import stream_attributes
    from faux_checks.gate.stream.source import DataSource

    source = DataSource.open(data_path)
    return source, stream_attributes(policy, source.columns)


@task(**IO_TASK)
def key_shard_attributes(data_path: str, policy, chunk_rows: int, row_groups: tuple[int, int]):
    """Every protected column of one shard: each attribute's counts, levels and bottom-k keys."""
    from faux_checks.gate.stream.attributes import key_pass_attributes

    source, attributes = _attributes(data_path, policy)
    return key_pass_attributes(source, attributes, chunk_rows=chunk_rows, row_groups=row_groups)


@task(**IO_TASK)
def sample_shard_attributes(data_path: str, policy, feature_spec, chunk_rows: int, row_groups: tuple[int, int],
                            max_keys: dict):
    """One shard's rows of each attribute's global training sample, encoded once."""
    from faux_checks.gate.stream.attributes import sample_pass_attributes

    source, attributes = _attributes(data_path, policy)
    return sample_pass_attributes(source, attributes, feature_spec=feature_spec, chunk_rows=chunk_rows,
                                  row_groups=row_groups, max_keys=max_keys)


@task(**TASK)
def prepare_attributes_models(model_path: str, samples: dict, data_path: str, policy, feature_spec, chunk_rows: int,
                              work_dir: str, allow_pickle: bool = False, trusted_types: tuple[str, ...] = ()):
    """One auxiliary model per attribute, trained once; saved as TorchScript for the workers."""
    import torch

    from faux_checks.gate.sections import attribute_key
    from faux_checks.gate.stream.attributes import prepare_attributes
    from faux_checks.inputs.models import load_model

    target = load_model(model_path, allow_pickle=allow_pickle, trusted_types=trusted_types)
    _, attributes = _attributes(data_path, policy)
    prepared = prepare_attributes(target, samples, attributes, feature_spec=feature_spec, chunk_rows=chunk_rows)
    plans, paths = {}, {}
    for name, (plan, aux) in prepared.items():
        plans[name], paths[name] = plan, str(Path(work_dir) / f"aux_model.{attribute_key(name)}.pt")
        torch.jit.save(aux.to_torchscript(), paths[name])
    return plans, paths


@task(**IO_TASK)
def score_shard_attributes(model_path: str, aux_paths: dict, data_path: str, policy, plans: dict,
                           row_groups: tuple[int, int], part_paths: dict, threads: int, allow_pickle: bool = False,
                           trusted_types: tuple[str, ...] = ()) -> ShardResult:
    """Score pass over one shard for every attribute; one part file per attribute."""
    import torch

    from faux_checks.gate.stream.attributes import score_pass_attributes
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
            writers[name] = ScoresWriter(path)
        counts = score_pass_attributes(target, auxes, source, plans, attributes, writers, row_groups=row_groups)
        for w in writers.values():
            w.commit()
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    return ShardResult(row_groups, ",".join(part_paths.values()), counts, time.perf_counter() - t0, os.getpid(),
                       peak_rss_mb(), started_at)


@flow(name="fairness-score-sharded-attributes", log_prints=True)
def score_sharded_attributes(model_path: str, data_path: str, out_path: str, policy: dict | None = None,
                             feature_spec_path: str | None = None, aux_model_path: str | None = None,
                             chunk_rows: int | None = None, work_dir: str | None = None, allow_pickle: bool = False,
                             trusted_types: list[str] | None = None):
    """Score a large Parquet/CSV file for every protected attribute of the policy, sharded over Dask workers.

    Parameters
    ----------
    model_path, data_path, feature_spec_path, chunk_rows, work_dir, allow_pickle, trusted_types
        As :func:`faux_checks_flows.shard.score_sharded`.
    out_path : str
        Base name of the scores files (``scores.parquet`` -> ``scores.<key>.parquet`` per attribute;
        :func:`~faux_checks.gate.stream.attributes.attribute_paths`); none is overwritten.
    policy : dict
        ``Policy.model_dump(mode="json")`` of a policy with ``[[attributes]]``.
    aux_model_path : None
        Refused: each attribute trains its own auxiliary model.

    Returns
    -------
    ``Completed`` (passed) or ``Failed`` (failed / undecided) state whose data is the
    :class:`~faux_checks.gate.stream.attributes.StreamAttributesResult`.
    """
    from prefect.context import FlowRunContext

    from faux_checks.errors import InputError
    from faux_checks.gate.sections import attribute_key
    from faux_checks.gate.policy import Policy
    from faux_checks.gate.stream.attributes import (attribute_paths, stream_attributes, stream_columns,
                                                    summarize_attributes)
    from faux_checks.gate.stream.plan import check_missing_protected, resolve_feature_spec
    from faux_checks.gate.stream.sample import merge_samples
    from faux_checks.gate.stream.score import StreamCounts
    from faux_checks.gate.stream.source import DataSource, check_rows, csv_to_parquet
    from faux_checks.inputs.tabular import FeatureSpec

    logger = run_logger()
    t0, t_wall = time.perf_counter(), time.time()
    policy = Policy.model_validate(policy)
    if aux_model_path:
        raise InputError(f"one auxiliary model given, but the policy checks {', '.join(policy.attribute_names)}, "
                         "each with its own; drop the auxiliary model")
    chunk_rows = int(chunk_rows or policy.scale.chunk_rows)
    out = Path(out_path)
    paths = attribute_paths(out, policy.attribute_names, per_attribute=policy.reports_per_attribute)
    own_work_dir = work_dir is None
    work = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix=f".{out.name}.shards-", dir=out.parent))
    work.mkdir(parents=True, exist_ok=True)
    trusted = tuple(trusted_types or ())
    try:
        source = DataSource.open(data_path)
        spec = resolve_feature_spec(source, policy, FeatureSpec.load(feature_spec_path) if feature_spec_path else
                                    carried_spec(model_path, trusted), chunk_rows=chunk_rows)
        check_rows(source, spec, chunk_rows=max(chunk_rows, 65_536))
        attributes = stream_attributes(policy, source.columns)
        notes = []
        if source.format == "csv":
            source = csv_to_parquet(source, work / "data.parquet", columns=stream_columns(spec, attributes),
                                    chunk_rows=chunk_rows)
            notes.append(f"CSV copied to Parquet ({source.n_row_groups} row groups of {chunk_rows:,} rows) to shard it")
        slots = cluster_threads(FlowRunContext.get())
        shards = plan_shards(source.row_group_rows, slots * policy.scale.shards_per_worker)
        logger.info("%s: %s rows -> %d shards on %d worker thread(s), %d protected attributes", source.path,
                    f"{source.n_rows:,}", len(shards), slots, len(attributes))
        t1 = time.perf_counter()
        keyed = [f.result() for f in [key_shard_attributes.submit(source.path, policy, chunk_rows, rg)
                                      for rg in shards]]
        max_keys = {}
        for a in attributes:
            keys = merge_samples([k[a.name] for k in keyed])
            try:
                check_missing_protected(keys, a.policy)
            except InputError as exc:
                raise InputError(f"protected attribute '{a.name}': {exc}" if len(attributes) > 1 else str(exc)) from exc
            max_keys[a.name] = keys.threshold
        del keyed
        parts = [f.result() for f in [sample_shard_attributes.submit(source.path, policy, spec, chunk_rows, rg, max_keys)
                                      for rg in shards]]
        samples = {a.name: merge_samples([p[a.name] for p in parts]) for a in attributes}
        del parts
        t2 = time.perf_counter()
        plans, aux_paths = prepare_attributes_models(model_path, samples, source.path, policy, spec, chunk_rows,
                                                     str(work), allow_pickle, trusted)
        del samples
        t3 = time.perf_counter()
        # one output per attribute, as the one-attribute flow's: a Parquet output is a dataset whose parts the
        # workers write in place (committed by a rename, no serial merge); a CSV output merges its parts
        outputs = {}
        try:
            for a in attributes:
                (work / attribute_key(a.name)).mkdir(exist_ok=True)
                outputs[a.name] = open_output(paths[a.name], work / attribute_key(a.name), len(shards))
            part_paths = [{a.name: outputs[a.name].parts[i] for a in attributes} for i in range(len(shards))]
            futures = [score_shard_attributes.submit(model_path, aux_paths, source.path, policy, plans, rg, pp,
                                                     policy.scale.threads_per_worker, allow_pickle, trusted)
                       for rg, pp in zip(shards, part_paths, strict=True)]
            results: list[ShardResult] = [f.result() for f in futures]
            t4 = time.perf_counter()
            for a in attributes:
                outputs[a.name].finish()
        except BaseException:
            for output in outputs.values():
                output.abort()
            raise
        t5 = time.perf_counter()
    finally:
        if own_work_dir:
            shutil.rmtree(work, ignore_errors=True)
    counts = {a.name: StreamCounts.merge([r.counts[a.name] for r in results]) for a in attributes}
    workers = {}
    for r in results:
        workers[r.pid] = max(workers.get(r.pid, 0.0), r.peak_rss_mb)
    first = min((c.first_score_at for c in counts.values() if c.first_score_at), default=None)
    timings = {"plan": t1 - t0, "sample": t2 - t1, "aux": t3 - t2, "score": t4 - t3, "merge": t5 - t4,
               "total": t5 - t0, "first_score": (first - t_wall) if first else None,
               "shard_seconds": [r.seconds for r in results]}
    result = summarize_attributes(counts, plans, attributes, source=source, out_paths=paths, timings=timings,
                                  extra_notes=notes,
                                  model_info={"model_path": model_path, "shards": [list(s) for s in shards],
                                              "worker_threads": slots, "worker_peak_rss_mb": workers})
    markdown = "\n\n".join([f"## sharded fAux scores, {len(attributes)} protected attributes: "
                            f"**{markdown_text(result.decision)}**", *[f"- {markdown_text(r)}" for r in result.reasons],
                            *[f"### {markdown_text(s.attribute)}\n\n" + summary_markdown(s.summary) for s in result.sections]])
    create_markdown_artifact(key="fairness-score-sharded", markdown=markdown,
                             description=f"sharded fAux scores of {markdown_text(data_path)}")
    logger.info("%r", result)
    if result.decision != "passed":
        return Failed(message=repr(result), data=result)
    return Completed(message=repr(result), data=result)
