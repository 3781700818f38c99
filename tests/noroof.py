"""A run folder without an off-chip roof, as `--max-ws 64MiB` leaves one:
tests/data/run_a with every working set past the given size dropped (its DRAM band starts at
4x its 32 MiB L3), so roofs.json has cache and compute roofs but no dram roof."""
import json
import shutil
from pathlib import Path

import pandas as pd

DATA = Path(__file__).parent / "data"


def run_without_dram(dest: Path, max_ws: int = 64 * 2**20) -> Path:
    """Return dest, a copy of run_a measured as if with --max-ws max_ws, its roofs re-derived."""
    from roofs.reports.finish import finish_run
    dest = Path(dest)
    shutil.copytree(DATA / "run_a", dest)
    df = pd.read_csv(dest / "measurements.csv")
    keep = df["working_set_bytes"] <= max_ws
    df[keep].to_csv(dest / "measurements.csv", index=False)
    meta = json.loads((dest / "run.json").read_text())
    kept = set(df.loc[keep, "point_id"])
    meta["points"] = [p for p in meta["points"] if p["point_id"] in kept]
    meta["options"]["max_ws"] = max_ws
    meta["command"] += f" --max-ws {max_ws}"
    (dest / "run.json").write_text(json.dumps(meta, indent=1))
    problems = finish_run(dest, charts=False)  # its roofs and report are read, not its pictures
    assert not problems, problems
    return dest
