"""The simulator's criteria over a few dozen seeds per model, as tests/test_sim.py asserts them:
a module of its own, so the background lane's process imports it without the test suite's."""
from roofs.sim import score
from roofs.sim.machines import MACHINES

QUIET = {"cpu": "quiet", "cuda": "gpu"}
SEEDS = 24


def criteria(key: str) -> dict:
    """Return the criteria's figures for model key under its quiet noise over SEEDS seeds."""
    t = score.evaluate(key, QUIET[MACHINES[key].kind], range(SEEDS), slower=False)
    return {"levels": t.share("levels_ok"), "covered": t.share("covered"), "within": t.share("within"),
            "false_pairs": t.false_pairs, "misses": t.misses.most_common(5),
            "false_names": t.false_names.most_common(5)}
