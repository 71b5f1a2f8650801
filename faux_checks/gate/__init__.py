"""The gate: the policy, the in-memory check and its steps, the decision engine, streaming (docs/architecture.md)."""
