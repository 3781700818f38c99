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


# the derivation: rows to roofs and intervals (model, statistic), their confirmation and sustained
# figures (confirm), the link and launch roofs, and what a revisit pass measures again (revisit)
DERIVATION = ("roofs/analysis/model.py", "roofs/analysis/statistic.py", "roofs/analysis/confirm.py",
              "roofs/analysis/links.py", "roofs/analysis/launch_floor.py", "bench/measure/revisit.py")
DERIVATION_CODE_LINES = 1000


def code_lines(source: str) -> int:
    """Return the lines of source that hold code: not blank, not a comment, not a docstring."""
    docs = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            docs.update(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for i, line in enumerate(source.splitlines(), 1)
               if line.strip() and not line.strip().startswith("#") and i not in docs)


def test_code_lines_leave_out_blanks_comments_and_docstrings():
    src = '"""A module.\n\nIts docstring."""\n\n# a comment\ndef f(x):\n    """One line."""\n    return x  # kept\n'
    assert code_lines(src) == 2   # def f(x): and return x


def test_the_derivation_is_about_a_thousand_lines_of_code():
    counts = {p: code_lines((ROOT / p).read_text()) for p in DERIVATION}
    assert sum(counts.values()) <= DERIVATION_CODE_LINES, counts
