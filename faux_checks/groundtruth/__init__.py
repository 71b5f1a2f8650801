"""Data generators with a known individual-fairness ground truth (IFS), to evaluate testers.

- ``fused``: fused synthetic data (two real datasets joined so that a bias level sets the
  dependence between y and c), with the ground-truth IFS of a target model (the paper's set-up,
  reconstructed).
- ``proxy``: proxy injection on real rows: c drawn independently of the real features, proxies
  generated from c with stored noise, labels with a historical-bias level; the exact counterfactual
  regenerates the proxies for another c.
- ``definitional``: UCI Adult's definitional counterfactual (sex flipped, relationship Husband ↔ Wife).
- ``labels``: historical label bias against a protected group.
- ``joint``: joint-only proxies: a pair of columns, each alike in every group, that carries c together.
- ``linked``: the audit rows with a person key and a separate protected file with a share u of the keys missing
  (at random, more in the protected group, or the truly flagged people first), for any rows with a known truth.
- ``zipcode``: a 60-level categorical proxy generated under the inverse-CDF or the Gumbel-max coupling (the
  data cannot tell them apart).
"""
