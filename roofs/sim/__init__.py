"""A simulator that knows the truth: machine models, noise models, simulated runs in the real
schema, and the score of the roof derivation against the truth (python -m roofs.sim)."""
