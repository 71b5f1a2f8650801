"""Data generators with a known individual-fairness ground truth (IFS), to evaluate testers.

- ``fused``: fused synthetic data (two real datasets joined so that a bias level sets the
  dependence between y and c), with the ground-truth IFS of a target model.
"""
