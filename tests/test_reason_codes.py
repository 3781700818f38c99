"""Every refusal carries a reason code: each raise of a bench.util.Refusal subclass in bench/,
roofs/ and kernels/ names its code, and so does each refusal the CLI prints from a sentence
(bench.run.options.refuse). Tests and callers read the code; the sentence is free to change."""
import ast
from pathlib import Path

from bench.run import options
from bench.util import Refusal

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for top in ("bench", "roofs", "kernels") for p in (ROOT / top).rglob("*.py"))


def refusal_classes(trees) -> set[str]:
    """Return the names of the classes that subclass Refusal, directly or through another one."""
    names, grew = {"Refusal"}, True
    while grew:
        grew = False
        for tree in trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and node.name not in names and any(
                        (b.id if isinstance(b, ast.Name) else getattr(b, "attr", None)) in names for b in node.bases):
                    names.add(node.name)
                    grew = True
    return names


def uncoded(trees, classes) -> list[str]:
    """Return "path:line name" for each raise of a refusal class, or refuse() of a sentence, without a code."""
    out = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            call = node.exc if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) else \
                node if isinstance(node, ast.Call) else None
            if call is None:
                continue
            name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", None)
            sentence = name == "refuse" and call.args and isinstance(call.args[0], (ast.Constant, ast.JoinedStr))
            if ((isinstance(node, ast.Raise) and name in classes) or sentence) and len(call.args) < 2 \
                    and not any(k.arg == "code" for k in call.keywords):
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    return out


def test_every_refusal_names_its_code():
    trees = {p: ast.parse(p.read_text()) for p in SOURCES}
    classes = refusal_classes(trees)
    # the errors of the API, the options, the registry, the models, the profile, the budget, the fleet
    # and check, the devices and the launches
    assert {"APIError", "OptionError", "RegistryError", "ModelError", "ProfileError", "BudgetError", "FleetError",
            "CheckError", "DeviceError", "LaunchError"} <= classes
    assert uncoded(trees, classes) == []


def test_the_scan_finds_a_refusal_without_a_code():
    src = ("class OwnError(Refusal):\n    pass\n\n\ndef f(x):\n    if x:\n        raise OwnError('bad x')\n"
           "    raise OwnError('bad', 'bad_x')\n\n\ndef main():\n    return refuse('no code here.')\n")
    trees = {ROOT / "bench" / "own.py": ast.parse(src)}
    assert uncoded(trees, refusal_classes(trees)) == ["bench/own.py:7 OwnError", "bench/own.py:12 refuse"]


def test_refuse_records_the_code_and_prints_the_sentence(capsys):
    before = len(options.REFUSED)
    assert options.refuse(Refusal("a sentence.", "some_code")) == 2
    assert options.refuse("another sentence.", "other_code") == 2
    assert options.REFUSED[before:] == ["some_code", "other_code"]
    assert capsys.readouterr().err == "roofbench: a sentence.\nroofbench: another sentence.\n"
    del options.REFUSED[before:]


# the tests whose subject is a document's text: they check what a reader is told, by design
DOC_TESTS = {"test_docs.py", "test_readme.py", "test_readme_figures.py"}
PROSE_CHARS = 20


def prose_asserts(trees) -> list[str]:
    """Return "file:line" of each assert that tests whether a phrase of PROSE_CHARS characters or
    more (a string literal, or an f-string's literal parts) is in or not in something."""
    out = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Assert):
                continue
            for sub in ast.walk(node.test):
                if not (isinstance(sub, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in sub.ops)):
                    continue
                left = sub.left
                text = left.value if isinstance(left, ast.Constant) and isinstance(left.value, str) else \
                    "".join(v.value for v in left.values if isinstance(v, ast.Constant)) \
                    if isinstance(left, ast.JoinedStr) else ""
                if len(text) >= PROSE_CHARS:
                    out.append(f"{path.name}:{node.lineno}")
                    break
    return out


def test_no_test_asserts_on_a_prose_phrase():
    """Tests assert on reason codes and numbers; a message's wording is free to change."""
    tests = sorted(p for p in (ROOT / "tests").glob("*.py") if p.name not in DOC_TESTS)
    assert prose_asserts({p: ast.parse(p.read_text()) for p in tests}) == []


def test_the_scan_finds_a_prose_assert():
    src = ("def test_x(out):\n    assert 'a sentence of some length' in out\n    assert 'short' in out\n"
           "    assert out == 1, 'a message after the assert is no test of prose'\n"
           "    assert f'{out} and a phrase long enough' not in out\n")
    assert prose_asserts({ROOT / "tests" / "test_x.py": ast.parse(src)}) == ["test_x.py:2", "test_x.py:5"]
