"""Size limits of the source: run_bench.py only parses the run's options and dispatches (at
most 200 lines, its one parser and main its only functions), and no module of bench/, roofs/
or kernels/ runs past 600 lines (a module that grows past it is split by what it holds)."""
import ast
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGES = ("bench", "roofs", "kernels")
CLI_LINES, MODULE_LINES = 200, 600


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_run_bench_is_parsing_and_dispatch():
    path = ROOT / "run_bench.py"
    assert lines(path) <= CLI_LINES, f"run_bench.py has {lines(path)} lines"
    tree = ast.parse(path.read_text())
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert defined == {"build_parser", "main"}, defined


def test_no_module_is_longer_than_600_lines():
    long = {str(p.relative_to(ROOT)): lines(p) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
            if lines(p) > MODULE_LINES}
    assert long == {}, long
