"""Drift audit of a deployed model version: the data it was gated on vs a current batch.

:func:`~.drift.run_audit` makes three comparisons and one decision:

1. **Column drift** (:mod:`.columns`; Evidently ``DataDriftPreset``, per-column tests) over the target's input
   columns, the protected attribute and the other columns both batches share (the label is
   left to step 3). Columns are screened first (bad-inputs case C04): a column that is absent or
   entirely empty in a batch is *skipped* with the reason; a column that mixes value types
   (strings and integers) is compared as text categories; a numeric column that is constant in
   the reference is compared as "that value" vs "any other value" (Evidently's normed
   Wasserstein distance divides by the reference's standard deviation, 0 there); a column
   constant in both batches is compared here (same value: no drift). Every such choice is a
   note on the column, in the report and in the log.
2. **Fairness drift** (:mod:`.fairness`): the fAux check (:func:`faux_checks.gate.one_attribute.check_one_attribute`) on both batches with
   the same policy and seed (at most ``[audit] max_rows`` rows each, a seeded sample): flagged
   fraction overall and per protected group, and a two-sample Kolmogorov-Smirnov test on the
   defined LIC scores (scipy ``ks_2samp``).
3. **Classification quality** (:mod:`.classification`) of the target model (Evidently ``ClassificationPreset``) when the
   policy names a label column that both batches hold.

Decision (:mod:`.decision`, read by the gate's engine :func:`faux_checks.gate.decision.decide`; policy
``[audit]``, :class:`~faux_checks.gate.policy.AuditSettings`):

- ``failed`` when any limit is exceeded: the protected attribute drifted; the share of drifted
  feature/protected columns is above ``max_drifted_share``; the current fAux check fails the
  gate's own rule; the flagged fraction rose by more than ``max_flagged_fraction_increase``
  (overall) or ``max_group_flagged_fraction_increase`` (a group with at least
  ``decision.min_group_rows`` rows in both batches); the KS test on the scores has p <
  ``score_ks_pvalue`` with a statistic of at least ``score_ks_min_statistic``; the ROC-AUC fell
  by more than ``max_roc_auc_drop`` (when set);
- ``undecided`` when no limit is exceeded but a required comparison could not be computed
  (current batch below ``min_rows``, a fAux check that could not run or was undecided, the
  protected column not comparable, ...);
- ``passed`` otherwise.

Every protected attribute of the policy is audited by the same path (one attribute, ``protected =
"..."``, is a list of one; ``[[attributes]]`` and intersections give several): steps 1 and 3 once,
step 2 once per attribute with its own auxiliary model, and one decision
(:func:`~.decision.decide_audit`; with several attributes each one's limits are prefixed
``attribute/`` as the gate's rules).

The results are :mod:`.results`. Only :mod:`.columns` and :mod:`.classification` import Evidently,
lazily (its import takes 4-7 s).
"""
