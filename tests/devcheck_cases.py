"""Gate cases for the device check's rehearsal on a CPU (tests/test_device_check.py runs them
with `--noconftest` under tests/gate_verdicts.py; not collected by the suite: no test_
prefix). Each case gates the impl its op and impl parameters name, as tests/test_gpu_paths.py's
do: one passes, one fails, one hangs as a kernel stuck in a CUDA synchronize (SIGINT and
SIGTERM blocked, asleep in C: only SIGKILL ends it), and one after it passes when the check
runs the cases again past the hung one."""
import pytest
from hang_run import hang_forever


@pytest.mark.parametrize("op,impl,behaviour", [("stream.copy", "torch", "pass"), ("stream.triad", "torch", "fail"),
                                               ("stream.read", "torch", "hang"), ("stream.write", "torch", "pass")])
def test_gate(op, impl, behaviour):
    if behaviour == "hang":
        hang_forever()
    assert behaviour == "pass", f"{op}/{impl} gave wrong values"
