"""A simulator that knows the truth: machine models (machines.py), noise that only slows a call
(noise.py), simulated runs in the real schema and their truth (generate.py), a run written as a run
folder on disk (folder.py), and the score of the
roof derivation against that truth (score.py; python -m roofs.sim writes the table)."""
from roofs.sim.generate import plan, simulate, truth
from roofs.sim.machines import MACHINES
from roofs.sim.noise import NOISES

__all__ = ["MACHINES", "NOISES", "plan", "simulate", "truth"]
