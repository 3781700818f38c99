"""Link roofs (roofs/analysis/links.py; ARCHITECTURE.md, rule 10): the one statistic over a
link's message sizes within Policy.shape_tol of its best, with its one-sided interval."""
import math

import pandas as pd
import pytest

from bench.policy import DEFAULT
from roofs.analysis.links import link_roofs
from roofs.analysis.model import rated

MiB = 2**20


def copy(size_mib: int, gbps: float, memory: str = "pinned", pass_no: int = 1, op: str = "transfer.h2d") -> dict:
    nbytes = size_mib * MiB
    ms = nbytes / (gbps * 1e9) * 1e3
    pid = f"{op}/torch[memory={memory},bytes={nbytes}]@warm" + (f"#pass{pass_no}" if pass_no > 1 else "")
    return {"point_id": pid, "op": op, "family": "transfer", "impl": f"{op}/torch", "backend": "torch",
            "dtype": "", "memory": memory, "bytes": nbytes, "working_set_bytes": nbytes, "flops": 0,
            "mode": "warm", "median_ms": ms, "p20_ms": ms, "samples": 20, "stop": "converged", "gbps": gbps,
            "gflops": math.nan, "status": "ok", "flag": "", "pass": pass_no}


def test_a_host_copy_roof_is_the_statistic_of_its_large_messages_with_an_interval():
    """Pinned host-to-device copies of 1, 64, 256 and 1,024 MiB read 20, 50, 52 and 53 GB/s
    (the 1 MiB copy pays its latency), the 1,024 MiB copy 51 in a second pass. Its plateau is
    the sizes within 10% of 53 (50, 52, 53); the roof is their second best, 52, at 256 MiB;
    its top reaches past the best by the larger of 3 x ln(53/52) and pass_reach(2) x ln(53/51).
    Pageable copies are their own roof: one size, 12 GB/s, its interval at least
    Policy.min_halfwidth wide."""
    rows = [copy(1, 20.0), copy(64, 50.0), copy(256, 52.0), copy(1024, 53.0), copy(1024, 51.0, pass_no=2),
            copy(64, 12.0, memory="pageable")]
    roofs = {r.name: r for r in link_roofs(rated(pd.DataFrame(rows), None))}
    assert set(roofs) == {"host.h2d.pinned", "host.h2d.pageable"}
    pinned = roofs["host.h2d.pinned"]
    assert pinned.value == pytest.approx(52.0) and pinned.working_set_bytes == 256 * MiB
    reach = max(DEFAULT.interval_reach * math.log(53 / 52), DEFAULT.pass_reach(2) * math.log(53 / 51))
    assert pinned.interval == pytest.approx((52.0, 53.0 * math.exp(reach)))
    assert pinned.extra["pass_count"] == 2
    pageable = roofs["host.h2d.pageable"]
    assert pageable.value == pytest.approx(12.0)
    assert pageable.interval == pytest.approx((12.0, 12.0 * (1 + 2 * DEFAULT.min_halfwidth)))
