"""Streaming fAux scores for audit data larger than memory: source, sample, plan, score, run.

:func:`~.run.score_stream` reads a Parquet or CSV file in chunks of at most ``chunk_rows`` rows,
so peak memory is set by the chunk and by the auxiliary model's training sample, never by the
number of rows n. Two passes over the file:

1. **Sample pass** (:func:`~.passes.sample_pass` with :mod:`.sample`, reading chunks from :mod:`.source`). Counts rows, missing
   protected values and the protected attribute's levels, and keeps the auxiliary model's
   training sample: the ``policy.aux.max_train_rows`` audited rows with the smallest seeded hash
   key of their row number (bottom-k sampling, :func:`~.sample.row_keys`; a uniform sample
   without replacement). The key depends only on the row number and ``policy.seed``, so the
   sample is the same whatever the chunk size and however the file is split into shards: the
   bottom-k of a union is the bottom-k of the parts' bottom-k (:func:`~.sample.merge_samples`).
   With n ≤ ``max_train_rows`` every audited row is in it, in input order, exactly as
   :func:`faux_checks.gate.one_attribute.check_one_attribute` trains.
2. **Setup** (:mod:`.plan`). The auxiliary model is trained once on that sample (seed
   ``policy.seed``; quality on its held-out rows) or a given one is wrapped (quality on the whole
   sample). The protected groups and the target's output form are fixed here, once, for every
   chunk.
3. **Score pass** (:func:`~.passes.score_pass` with :mod:`.score`). Every chunk is encoded with the
   :class:`~faux_checks.FeatureSpec` and scored with :class:`~faux_checks.FAuxTester`; one row per
   input row (``row``, ``lic_score``, ``flagged``, ``status``, ``group``) is appended to the
   scores file in input order, and :class:`~.score.StreamCounts` keeps running counts that give
   the flagged fraction, the undefined count and per-group counts exactly (no score is kept in
   memory).

:func:`~.summary.attribute_summary` decides each attribute from its counts and
:func:`~.outcome.summarize` decides once over the attributes (:func:`faux_checks.gate.sections.combine`);
:func:`~.run.score_stream` runs the whole recipe in one process.

Chunks never cross a Parquet row group (a row group larger than ``chunk_rows`` is read in
several batches); CSV chunks are ``pd.read_csv(chunksize=chunk_rows)``. The sharded Prefect flow
(``flows/shard.py``) runs the same two passes on contiguous row-group ranges and merges with
:func:`~.sample.merge_samples` and :meth:`~.score.StreamCounts.merge`, training the aux model
and its extra seeds on workers (:mod:`.aux_seeds`) and writing a partitioned dataset, one part
per shard (:mod:`.output`); its scores are those of :func:`~.run.score_stream` (same chunks,
same models, same per-row maths).

One unit for N ≥ 1 protected attributes (``protected = "..."``, or ``[[attributes]]`` and
intersections): the passes (:mod:`.passes`) read the file once for all of them, each attribute
with its own sample, auxiliary model, counts and scores file; one result type,
:class:`~.outcome.StreamResult`, with one :class:`~.outcome.StreamSection` per attribute.

Differences from :func:`~faux_checks.gate.one_attribute.check_one_attribute`, each recorded in
``StreamSummary.notes``: every row is scored (``policy.max_rows`` is not applied); baseline
testers and per-feature evidence are not computed (a policy with a *gating* baseline tester gives
``undecided``); a continuous protected attribute is grouped by the training sample's quartiles;
IG's ``"mean"`` baseline is the training sample's mean.
"""
