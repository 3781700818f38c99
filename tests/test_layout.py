"""The house's shape (ARCHITECTURE.md, Layout): the import graph built from the source, every
import at any depth, has no circle and no arrow back up the layers; no folder lies flat
with more than eight modules; library code holds no test doubles; each optional import
deferred into a function says why."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
PACKAGES = ("bench", "roofs", "kernels")

# ARCHITECTURE.md's layers, top of the list first: a module imports only from its own layer
# or from layers above it (a lower number).
LAYERS = [
    (0, ("bench", "roofs")),   # the top packages themselves: empty __init__ files
    (1, ("kernels", "bench.util", "bench.identity")),
    (2, ("bench.results",)),
    (3, ("bench.hw",)),
    (4, ("roofs.analysis",)),
    (5, ("bench.measure", "bench.ops")),
    (6, ("bench.aot",)),
    (7, ("roofs.charts", "roofs.reports", "roofs.sim")),
    (8, ("bench.run",)),
    (9, ("bench.api", "bench.models", "bench.examples", "bench.doctables", "run_bench")),
    (10, ("bench.devcheck",)),
]
# may be imported inside a function, with a reason
OPTIONAL = ("triton", "pynvml", "amdsmi", "kernels", "torch._inductor")
# (torch._inductor: seconds to import, and only a profiled torch.compile program needs it)


def modules() -> dict[str, Path]:
    out = {"run_bench": ROOT / "run_bench.py"}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = p
    return out


def imports_of(name: str, path: Path, known) -> set[str]:
    """Return the project modules that module `name` imports anywhere in its source."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and not name.startswith(t + "."):  # a package's own __init__ is not an edge
                out.add(t)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {m: imports_of(m, p, mods) for m, p in mods.items()}


def circles(g) -> list[list[str]]:
    """Return the strongly connected groups of two or more modules (Tarjan)."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in g:
        if v not in index:
            visit(v)
    return out


def layer_of(module: str) -> int:
    for number, prefixes in reversed(LAYERS):  # the longest prefix first: "bench" holds every bench module
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return number
    raise AssertionError(f"{module} is in no layer of ARCHITECTURE.md's Layout")


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_has_no_circle():
    assert circles(graph()) == []


def test_imports_point_down_the_layers():
    back = [f"{m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)})"
            for m, targets in graph().items() for t in sorted(targets) if layer_of(t) > layer_of(m)]
    assert back == []


@pytest.mark.parametrize("folder", ["bench", "roofs"])
def test_no_folder_lies_flat_beyond_eight_modules(folder):
    flat = [p.name for p in (ROOT / folder).glob("*.py") if p.name != "__init__.py"]
    assert len(flat) <= 8, flat


def test_no_test_doubles_or_tests_in_library_code():
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            assert not p.name.startswith("test_"), p
            for node in ast.walk(ast.parse(p.read_text())):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                    assert not any(n.split(".")[0] in ("unittest", "pytest") for n in names), p


def test_imports_inside_functions_are_optional_dependencies_with_a_reason():
    found = []
    for _name, path in modules().items():
        src = path.read_text()
        lines = src.splitlines()
        tree = ast.parse(src)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node not in tree.body:
                mod = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                text = " ".join(lines[node.lineno - 1: node.end_lineno])
                if not mod.startswith(OPTIONAL) or "#" not in text:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text.strip()}")
    assert found == []
