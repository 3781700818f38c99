"""Every refusal carries a reason code: each raise of a bench.util.Refusal subclass in bench/,
roofs/ and kernels/ names its code, and so does each refusal the CLI prints from a sentence
(bench.run.options.refuse). Tests and callers read the code; the sentence is free to change."""
import ast
import re
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
    assert options.refuse(Refusal("One.", "some_code")) == 2
    assert options.refuse("Two.", "other_code") == 2
    assert options.REFUSED[before:] == ["some_code", "other_code"]
    assert capsys.readouterr().err == "roofbench: One.\nroofbench: Two.\n"
    del options.REFUSED[before:]


# the tests whose subject is a document's text: they check what a reader is told, by design
DOC_TESTS = {"test_docs.py", "test_readme.py", "test_readme_figures.py"}
PROSE_CHARS = 20
PROSE_WORDS = 3
WORD = re.compile(r"[a-z]+[,.;:]?")


def _text(node) -> str:
    """Return a string literal's text, or an f-string's literal parts joined ("" for anything else)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    return ""


def is_prose(text: str) -> bool:
    """A phrase: PROSE_CHARS characters or more holding PROSE_WORDS lowercase words or more (a
    device's or a kernel's name, a command line or a figure with its unit is not one)."""
    return len(text) >= PROSE_CHARS and sum(1 for w in text.split() if WORD.fullmatch(w)) >= PROSE_WORDS


def _renders(fn) -> bool:
    """Whether a test function is marked pytest.mark.renders: its subject is the text a reader is shown."""
    return any("renders" in ast.unparse(d) for d in fn.decorator_list)


def _compared(node) -> list:
    """Return the expressions a test compares text with: each side of an assert's comparisons
    (in, not in, ==, !=) and the arguments of its startswith and endswith calls, or the match= of a
    call (pytest.raises, pytest.warns)."""
    if isinstance(node, ast.Assert):
        out = []
        for sub in ast.walk(node.test):
            if isinstance(sub, ast.Compare):
                out += [sub.left, *sub.comparators]
            elif isinstance(sub, ast.Call) and getattr(sub.func, "attr", "") in ("startswith", "endswith"):
                out += sub.args
        return out
    if isinstance(node, ast.Call):
        return [k.value for k in node.keywords if k.arg == "match"]
    return []


def prose_asserts(trees) -> list[str]:
    """Return "file:line" of each assert (or match=) that compares a prose phrase (is_prose) with
    something, outside the tests marked renders."""
    out = []
    for path, tree in trees.items():
        skip = {id(n) for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef) and _renders(fn)
                for n in ast.walk(fn)}
        for node in ast.walk(tree):
            if id(node) not in skip and any(is_prose(_text(e)) for e in _compared(node)):
                out.append(f"{path.name}:{node.lineno}")
    return sorted(set(out), key=lambda s: (s.split(":")[0], int(s.split(":")[1])))


def test_no_test_asserts_on_a_prose_phrase():
    """Tests assert on reason codes and numbers; a message's wording is free to change."""
    tests = sorted(p for p in (ROOT / "tests").glob("*.py") if p.name not in DOC_TESTS)
    assert prose_asserts({p: ast.parse(p.read_text()) for p in tests}) == []


def test_the_scan_finds_a_prose_assert():
    src = ("def test_x(out):\n    assert 'a sentence of some length' in out\n    assert 'short' in out\n"
           "    assert out == 1, 'a message after the assert is no test of prose'\n"
           "    assert f'{out} and a phrase long enough' not in out\n"
           "    assert out == 'the whole message, word for word'\n"
           "    assert out.startswith('a prefix of the message') and out.endswith('NVIDIA H200 SXM 141GB')\n"
           "    with pytest.raises(ValueError, match='the refusal in its own words'):\n        pass\n"
           "    assert out == '--comm --procs 2 --quick --out x'\n\n\n"
           "@pytest.mark.renders\ndef test_y(out):\n    assert 'the report says this to its reader' in out\n")
    assert prose_asserts({ROOT / "tests" / "test_x.py": ast.parse(src)}) == \
        ["test_x.py:2", "test_x.py:5", "test_x.py:6", "test_x.py:7", "test_x.py:8"]
