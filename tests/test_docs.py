"""The docs cannot drift from the code. Every figure README.md, REFERENCE.md and ARCHITECTURE.md
quote that the code or a committed run determines is computed here, from the code or from
the run folder's own files, and compared with what the docs say (as tests/test_refusals.py
runs every refusal REFERENCE.md lists): the module map against the modules on disk, the
method version against bench.results.METHOD_VERSION and CHANGELOG.md, the measurements.csv
columns against COLUMNS, the rules' thresholds and the options' defaults against the
constants and the Policy fields that hold them (REFERENCE.md's generated tables are
tests/test_doctables.py's), the sweeps' sizes against the sweeps, the device check's limits and the H200 plans
against the dry run's prediction, and each reference run's figures against its run.json and
roofs.json. Every code name and path the docs cite must exist, and every link to a rule or a
section must land on its anchor. A figure that changes whenever a kernel is added (a plan's
rows and seconds) is not quoted at all: `bash .ci/device-check --dry` prints it."""
import ast
import dataclasses
import importlib
import json
import math
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

import run_bench
from bench.aot import learned
from bench.aot import predict as pr
from bench.devcheck import plan as dp
from bench.hw.counters import FLAG_FRACTION
from bench.hw.device import CacheLevel, cpu_info
from bench.measure import runner, timing
from bench.measure.registry import FAMILY_ORDER, load_all
from bench.measure.runner import make_plan
from bench.measure.timing import default_window, timer_config
from bench.ops import _tune, gemm, stream
from bench.ops.stream import reread_sweep, ws_sweep
from bench.policy import DEFAULT, PRESETS, Policy
from bench.results import AXIS_COLUMNS, COLUMNS, METHOD_VERSION
from bench.run import commands, distributed
from bench.util import fmt_bytes
from roofs.reports import check, fleet

ROOT = Path(__file__).parent.parent
NAMES = ("README.md", "REFERENCE.md", "ARCHITECTURE.md", "CHANGELOG.md", "results/README.md")
DOCS = {name: (ROOT / name).read_text() for name in NAMES}
PACKAGES = ("kernels", "bench", "roofs")
RULE_ITEM = re.compile(r'^(\d+)\. <a id="rule-(\d+)"></a>\*\*', re.MULTILINE)  # "9. <a id="rule-9"></a>**Noise ..."
RULES = {int(n) for n, anchor in RULE_ITEM.findall(DOCS["ARCHITECTURE.md"]) if n == anchor}


def rule(n: int) -> str:
    """Return rule n's text in ARCHITECTURE.md: its list item, up to the next line that starts at the margin."""
    text = DOCS["ARCHITECTURE.md"]
    start = text.index(f'{n}. <a id="rule-{n}"></a>')
    end = re.compile(r"^\S", re.MULTILINE).search(text, text.index("\n", start))
    return text[start:end.start()]


def section(doc: str, heading: str) -> str:
    """Return the text of a doc from its heading `heading` to the next heading of that level or above."""
    text = DOCS[doc]
    m = re.search(rf"^(#+) {re.escape(heading)}$", text, re.MULTILINE)
    assert m, f"{doc} has no heading {heading!r}"
    end = re.compile(rf"^#{{1,{len(m.group(1))}}} ", re.MULTILINE).search(text, m.end())
    return text[m.end():end.start() if end else len(text)]


# ---- the module map ------------------------------------------------------------------------

def map_modules() -> list[str]:
    """Return the paths the module map in ARCHITECTURE.md's Layout names: each entry line
    (a name ending in / or .py left of the description column) nested by its indent."""
    block = re.search(r"```\n(run_bench\.py.*?)```", DOCS["ARCHITECTURE.md"], re.DOTALL).group(1)
    stack, out = [], []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        name = line.split()[0] if line.strip() else ""
        if indent >= 20 or not (name.endswith(("/", ".py"))):
            continue  # a description's continuation
        depth = indent // 2
        stack = stack[:depth] + [name]
        if name.endswith(".py"):
            out.append("".join(stack))
    return out


def test_the_module_map_names_every_module_and_no_other():
    named = map_modules()
    on_disk = {str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
               if p.name not in ("__init__.py", "__main__.py")} | {"run_bench.py"}
    assert len(named) == len(set(named)), "a module named twice in the map"
    ghosts, missing = sorted(set(named) - on_disk), sorted(on_disk - set(named))
    assert not ghosts, f"ARCHITECTURE.md's map names modules that do not exist: {ghosts}"
    assert not missing, f"modules missing from ARCHITECTURE.md's map: {missing}"


def imports_pyplot(node) -> bool:
    """Return whether an AST node imports matplotlib.pyplot (import ... or from matplotlib import pyplot)."""
    if isinstance(node, ast.Import):
        return any(a.name == "matplotlib.pyplot" for a in node.names)
    return isinstance(node, ast.ImportFrom) and (node.module == "matplotlib.pyplot" or node.module == "matplotlib"
                                                 and any(a.name == "pyplot" for a in node.names))


def test_the_modules_that_use_pyplot_are_the_ones_named():
    text = DOCS["ARCHITECTURE.md"]
    start = text.index("which import `matplotlib.pyplot`:")
    named = set(re.findall(r"`([\w/]+\.py)`", text[start:text.index("tests/test_docs.py", start)]))
    users = set()
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            if any(imports_pyplot(node) for node in ast.walk(ast.parse(p.read_text()))):
                users.add(str(p.relative_to(ROOT)))
    assert named == users, f"ARCHITECTURE.md names {sorted(named)}; pyplot is imported by {sorted(users)}"


# ---- names, paths, links and rule numbers ---------------------------------------------------

def resolves(dotted: str) -> bool:
    """Return whether a dotted name is a module, or an attribute (at any depth) of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            fields = getattr(obj, "__dataclass_fields__", {})
            if attr in fields:
                obj = fields[attr]
                continue
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


@pytest.mark.parametrize("doc", NAMES)
def test_every_code_name_and_path_the_docs_cite_exists(doc):
    spans = set(re.findall(r"`([^`\s]+)`", DOCS[doc]))
    dotted = {s.rstrip("()") for s in spans if re.fullmatch(r"(bench|roofs|kernels)(\.\w+)+(\(\))?", s)
              and not re.search(r"\.(json|jsonl|md|csv|png|html|py|gz)$", s)}
    assert not {d for d in dotted if not resolves(d)}, sorted(d for d in dotted if not resolves(d))
    base = (ROOT / doc).parent
    paths = {s for s in spans if re.fullmatch(r"\.?[\w.-]+(/[\w.*-]+)+/?", s) and "*" not in s
             and s.split("/")[0] in ("bench", "roofs", "kernels", "tests", ".ci", "results")}
    links = {m.split("#")[0] for m in re.findall(r"\]\(([^)\s]+)\)", DOCS[doc]) if not m.startswith(("#", "http"))}
    missing = sorted(p for p in paths if not (ROOT / p).exists()) + sorted(p for p in links if not (base / p).exists())
    assert not missing, f"{doc} names paths that do not exist: {missing}"


def slugs(doc: str) -> set[str]:
    """Return the anchors of a doc: its headings', as GitHub makes them, and its <a id> anchors."""
    headings = re.findall(r"^#+ (.+)$", DOCS[doc], re.MULTILINE)
    anchors = set(re.findall(r'<a id="([\w-]+)"></a>', DOCS[doc]))
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings} | anchors


@pytest.mark.parametrize("doc", NAMES)
def test_every_link_to_a_section_or_a_rule_lands_on_a_heading(doc):
    base = (ROOT / doc).parent
    bad = []
    for target, anchor in re.findall(r"\]\(([^)#\s]*)#([\w-]+)\)", DOCS[doc]):
        name = str(((base / target) if target else ROOT / doc).resolve().relative_to(ROOT))
        if anchor not in slugs(name):
            bad.append(f"{target}#{anchor}")
    assert not bad, f"{doc} links to headings that do not exist: {bad}"


def test_every_rule_cited_in_the_code_and_the_docs_exists():
    assert RULES == set(range(1, max(RULES) + 1))
    cited = {}
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")] + [ROOT / "run_bench.py"]
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in files} | DOCS
    for name, text in texts.items():
        for m in re.finditer(r"\brules? (\d+(?:(?:, | and | to |-)\d+)*)", text):
            for n in re.findall(r"\d+", m.group(1)):
                if int(n) not in RULES:
                    cited.setdefault(name, set()).add(int(n))
    assert not cited, f"rules cited that ARCHITECTURE.md does not have: {cited}"


def pct(x: float) -> str:
    return f"{x:.0%}"


# (rule, a phrase of it as the code's constant writes it): a constant changed without its rule fails here
RULE_FIGURES = [
    (4, f"under {pct(timing.TimerConfig.rel_spread)}"),
    (4, f"above {timing.FIRST_SAMPLE_FACTOR:g}x their median"),
    (4, f"once at least {timing.FIRST_RULE_MIN_REST} samples follow"),
    (4, f"({timer_config(False).min_time_s:g} s; {timer_config(True).min_time_s:g} s quick"),
    (5, f"runs to at least {DEFAULT.offchip_factor}x the last-level cache's reported size (`Policy.offchip_factor`)"),
    (5, f"under {DEFAULT.launch_factor:g}x the floor its own timing pays (`Policy.launch_factor`)"),
    (6, f"under {timing.FLOOR_CHECK_S * 1e6:g} us"),
    (9, f"more than {pct(runner.BUSY_SHARE)} of the cores"),
    (9, f"more than {runner.JUMP_FACTOR}x slower than the previous size"),
    (12, f"{DEFAULT.band_factor}x its\ncapacity"),
    (14, f"number at least {DEFAULT.min_samples} (`Policy.min_samples`"),
    (17, f"(within {FLAG_FRACTION:.0%} of the formula's)"),
    (18, f"(`--tolerance`, default {check.DEFAULT_TOLERANCE_PCT:g}%; `Policy.check_tolerance`)"),
    (18, f"compared to 1 part in 10^{-math.log10(check.EPS):.0f}"),
]


@pytest.mark.parametrize("number,phrase", RULE_FIGURES, ids=[f"rule{r}-{i}" for i, (r, _) in enumerate(RULE_FIGURES)])
def test_a_rules_figures_are_the_codes_constants(number, phrase):
    text = " ".join(rule(number).split())
    assert " ".join(phrase.split()) in text, f"rule {number} no longer says {phrase!r}"


# ---- the method version ----------------------------------------------------------------------

def test_the_changelog_lists_every_method_up_to_this_codes():
    listed = [int(n) for n in re.findall(r"^- method (\d+):", DOCS["CHANGELOG.md"], re.MULTILINE)]
    assert listed == list(range(1, METHOD_VERSION + 1)), (
        f"CHANGELOG.md lists methods {listed}; bench.results.METHOD_VERSION is {METHOD_VERSION}: "
        "a bump adds its entry, an entry waits for its bump")
    assert "[CHANGELOG.md](CHANGELOG.md)" in rule(13), "rule 13 no longer says the changelog holds the history"


@pytest.mark.parametrize("doc", NAMES)
def test_every_policy_field_the_docs_name_is_one(doc):
    unknown = set(re.findall(r"`Policy\.(\w+)`", DOCS[doc])) - {f.name for f in dataclasses.fields(Policy)}
    assert not unknown, f"{doc} names Policy fields that bench.policy.Policy does not have: {sorted(unknown)}"


def test_the_thresholds_section_names_every_preset():
    text = section("REFERENCE.md", "Thresholds")
    assert all(f"`{name}`" in text for name in PRESETS), list(PRESETS)


@pytest.mark.parametrize("doc", NAMES)
def test_a_doc_that_calls_a_method_current_names_this_codes(doc):
    text = DOCS[doc]
    for m in re.finditer(r"\bmethod(?: version)? (\d+)", text):
        near = text[max(0, m.start() - 40):m.end() + 30]
        if re.search(r"\b(now|current|this code's|this release's)\b", near):
            assert int(m.group(1)) == METHOD_VERSION, f"{doc}: {near!r} (METHOD_VERSION is {METHOD_VERSION})"
    assert not re.search(r"\bnow (at )?\d+\b", text), f"{doc} says a version is 'now' N: name METHOD_VERSION instead"


@pytest.mark.parametrize("doc", NAMES)
def test_derived_folders_the_docs_name_exist(doc):
    text = DOCS[doc]
    assert not re.search(r"\bm\d+-<", text), f"{doc} writes a derived folder's pattern with a method number"
    existing = {p.name for p in (ROOT / "results").glob("*/derived/*")}
    named = set(re.findall(r"\b(m\d+-[0-9a-f]{12})\b", text))
    assert named <= existing, sorted(named - existing)


def test_the_torch_versions_are_pyprojects_and_cis():
    pyproject = (ROOT / "pyproject.toml").read_text()
    low, high = re.search(r'"torch>=2\.(\d+),<2\.(\d+)"', pyproject).groups()
    supported = f"2.{low} to 2.{int(high) - 1}"
    assert f"CUDA torch ({supported})" in DOCS["README.md"]
    ci = re.search(r"torch==([\d.]+)", (ROOT / ".ci" / "run").read_text()).group(1)
    assert f"pip install torch=={ci} --index-url" in DOCS["README.md"], "the README's CPU wheel is not CI's"


# ---- the options' defaults ------------------------------------------------------------------

def option_row(option: str) -> str:
    row = [r for r in section("REFERENCE.md", "Every option").splitlines() if r.startswith(f"| `{option}` |")]
    assert len(row) == 1, f"REFERENCE.md's option table has no single row for {option}"
    return row[0]


def test_the_families_only_names_are_the_registrys():
    row = option_row("--only")
    families = re.search(r"comma-separated families \(([^)]*)\)", row).group(1)
    assert set(re.findall(r"`(\w+)`", families)) == set(FAMILY_ORDER)


@pytest.mark.parametrize("option,full,quick", [
    ("--budget", timer_config(False).budget_s, timer_config(True).budget_s),
    ("--min-time", timer_config(False).min_time_s, timer_config(True).min_time_s),
    ("--sustain", default_window(False), default_window(True)),
])
def test_the_timing_options_defaults_are_the_codes(option, full, quick):
    m = re.search(r"default ([\d.]+); ([\d.]+) with `--quick`", option_row(option))
    assert m, f"the {option} row no longer says 'default X; Y with `--quick`'"
    assert (float(m.group(1)), float(m.group(2))) == (full, quick), option


def test_the_quick_plans_figures_are_the_codes():
    quick, search = timer_config(True), load_all().ops["gemm.search"]
    readme = [r for r in DOCS["README.md"].splitlines() if r.startswith("| `--quick` |")]
    assert len(readme) == 1 and f"{quick.budget_s:g} s per point" in readme[0]
    row = option_row("--quick")
    assert f"{quick.budget_s:g} s per point ({search.budget_floor(True):g} s a GEMM search point)" in row
    assert f"{quick.min_time_s * 1000:g} ms of samples" in row


def test_the_other_defaults_and_thresholds_are_the_codes():
    actions = {a.option_strings[0]: a for a in run_bench.build_parser()._actions if a.option_strings}
    assert f"(default {actions['--counters'].const};" in option_row("--counters")
    assert f"(default {actions['--outlier-pct'].default:g})" in option_row("--outlier-pct")
    deadline = (f"x {distributed.DEADLINE_FACTOR:g} + {distributed.DEADLINE_SLACK_S / 60:g} min")
    assert deadline in option_row("--deadline") and deadline in section("REFERENCE.md", "Many GPUs, and across nodes")
    outliers = f"more than {fleet.OUTLIER_MADS:g} median absolute deviations (MAD) AND more than {fleet.OUTLIER_PCT:g}%"
    assert outliers in " ".join(section("REFERENCE.md", "Many GPUs, and across nodes").split())
    checked = " ".join(section("REFERENCE.md", "Did a roof move? (`check`)").split())
    tolerance = next(a for a in commands.build_check_parser()._actions if "--tolerance" in a.option_strings)
    assert f"(default {tolerance.default:g})" in checked
    assert f"below 0 or of {check.MAX_TOLERANCE_PCT:g} or more" in checked
    assert f"(more than {check.STATE_SHIFT:.0%} apart)" in checked


# ---- what a run writes -----------------------------------------------------------------------

def column_rows() -> list[list[str]]:
    text = DOCS["REFERENCE.md"]
    block = text[text.index("`measurements.csv` columns:"):]
    block = block[:block.index("\n\n", block.index("|"))]
    return [re.findall(r"`(\w+)`", row.split("|")[1]) for row in block.splitlines() if row.startswith("| `")]


def test_the_measurement_columns_table_is_the_schema():
    rows = column_rows()
    documented = [c for row in rows for c in row]
    assert sorted(documented) == sorted(COLUMNS), (sorted(set(COLUMNS) - set(documented)),
                                                    sorted(set(documented) - set(COLUMNS)))
    assert AXIS_COLUMNS in rows, "the axis columns' row differs from bench.results.AXIS_COLUMNS"


# ---- what is measured ------------------------------------------------------------------------

def test_the_stream_sweeps_start_where_the_docs_say():
    row = next(r for r in section("REFERENCE.md", "What is measured").splitlines() if r.startswith("| stream |"))
    gpu, cpu = pr.spec_device("h200"), cpu_info()
    for phrase, sweep in (("working sets from", ws_sweep), ("reread from", reread_sweep)):
        m = re.search(rf"{phrase} (\d+ [KMG]iB) \((\d+ [KMG]iB) on GPUs", row)
        assert m, f"REFERENCE.md's stream row no longer says '{phrase} X (Y on GPUs'"
        assert (m.group(1), m.group(2)) == (fmt_bytes(sweep(cpu, False)[0]), fmt_bytes(sweep(gpu, False)[0])), phrase


def test_a_cpus_quick_stream_sweep_ends_where_the_docs_say():
    factor = DEFAULT.quick_past_floor * DEFAULT.offchip_factor   # x the LLC
    row = next(r for r in section("REFERENCE.md", "What is measured").splitlines() if r.startswith("| stream |"))
    assert f"or to {factor}x the LLC in a CPU's quick run" in row
    # one size per octave from 4x the LLC to factor x: on any CPU whose factor x LLC is under the cap
    vm = dataclasses.replace(cpu_info(), caches=(CacheLevel("l3", 32 * 2**20),))
    band = len([s for s in stream.ws_sweep(vm, True) if s >= stream.offchip_floor(vm)])
    words = ("one", "two", "three", "four", "five")
    assert f"a CPU's quick run at {factor}x the last-level cache, {words[band - 1]} sizes into the off-chip band" \
        in " ".join(rule(5).split())


def test_the_gemm_search_runs_where_the_docs_say():
    row = next(r for r in section("REFERENCE.md", "What is measured").splitlines() if r.startswith("| gemm |"))
    gpu, cpu = pr.spec_device("h200"), cpu_info()
    ends = {}
    for name, device in (("CPU", cpu), ("GPU", gpu)):
        full, quick = gemm.search_sweep(device, False), gemm.search_sweep(device, True)
        ends[name] = f"from {full[0][0]} ({quick[0][0]}-{quick[-1][0]} quick) to {full[-1][0]} on a {name}"
    assert f"{ends['CPU']} and {ends['GPU']}" in row, ends
    words = ("one", "two", "three", "four", "five")
    assert f"after {words[DEFAULT.search_patience - 1]} sizes in a row that gain under {DEFAULT.search_gain:.0%} " \
           "over its best" in row
    assert f"a quick run's at most {words[DEFAULT.quick_search_sizes - 1]} sizes" in row
    assert f"at least {gemm.SEARCH_MIN_BUDGET_S:g} s here" in row


# ---- the dry run and the device check -------------------------------------------------------

@cache
def h200(quick: bool):
    """Return the prediction of the H200 plan, as `run_bench.py --dry-run --device-spec h200` makes it."""
    device = pr.spec_device("h200")
    return pr.predict(make_plan(load_all(), device, quick=quick), device, timer_config(quick), quick)


def test_the_readme_quotes_the_quick_plan_within_its_prediction():
    m = re.search(r"an H200's quick pass in under (\d+) min", DOCS["README.md"])
    assert m, "README.md's --quick line no longer says how long an H200's quick pass is predicted"
    assert h200(True).total_s < int(m.group(1)) * 60


def test_the_device_check_limits_table_is_the_checks_own():
    table = section("REFERENCE.md", "Planning a GPU run")
    rows = {r.split("|")[1].strip(): r.split("|")[2].strip() for r in table.splitlines()
            if r.startswith("| ") and not r.startswith("| what")}
    expected = {
        "the device call (`timeout_s`)": f"{dp.CALL_S}",
        "the check's own deadline (`--check-s`)": f"{dp.CHECK_S}",
        "the required steps' predictions, at most": f"{1 - dp.SLACK:.0%} of the deadline",
        "a step's limit, where the deadline leaves the later steps their predictions":
            f"{dp.CAP_FACTOR:g}x its prediction",
        "a gate case, before it is stopped as hung": f"{dp.CASE_S}",
        "a run with no new row, before it is stopped as hung": f"{dp.RUN_STALL_S}",
        "after SIGINT, before SIGKILL: a run / pytest": f"{dp.RUN_GRACE_S} / {dp.TEST_GRACE_S}",
        "kept back for the last archive": f"{dp.PACK_RESERVE_S}",
        "the least the quick run starts with": f"{dp.QUICK_MIN_S}",
    }
    assert {k: rows.get(k) for k in expected} == expected
    script = (ROOT / ".ci" / "device-check").read_text()
    assert f"timeout_s {dp.CALL_S}" in script and f"at {dp.CHECK_S} s" in script


def test_the_planning_sections_figures_are_the_codes():
    text = " ".join(section("REFERENCE.md", "Planning a GPU run").split())
    words = {2: "two", 3: "three", 4: "four", 5: "five"}
    phrases = (f"the datasheet's roofs at {pct(pr.EFFICIENCY)}",
               f"with {pr.HOST_CORES} processes for a datasheet part",
               f"the median of the last {words[learned.LEARN_RUNS]} ratios",
               f"the first {_tune.QUICK_CANDIDATES} candidates that fit (`--quick`) or {_tune.FULL_CANDIDATES} (full)",
               f"stream working sets under {fmt_bytes(stream.GPU_MIN_WS)}",
               f"gfx942's {fmt_bytes(_tune.LDS_LIMIT['gfx942'])} of LDS")
    for phrase in phrases:
        assert phrase in text, f"REFERENCE.md's Planning a GPU run no longer says {phrase!r}"


def test_the_model_presets_named_are_models_json():
    presets = set(json.loads((ROOT / "bench" / "models.json").read_text())["models"]) - {"tiny"}
    readme = next(r for r in DOCS["README.md"].splitlines() if r.startswith("| `model NAME"))
    assert set(re.findall(r"`([\w.-]+)`", readme.split("|")[2])) == presets
    text = " ".join(section("REFERENCE.md", "Your own kernels, and whole models").split())
    listed = re.sub(r"\([^)]*\)", "", text[text.index("Presets (`bench/models.json`):"):text.index("and a tiny one")])
    assert set(re.findall(r"\b([a-z]+[\w.]*-[\w.-]*\w)\b", listed)) == presets, listed


# ---- the committed runs' figures -------------------------------------------------------------

LABELS = {"HBM": "hbm", "DRAM": "dram", "L1": "l1", "L2": "l2", "L3": "l3", "bf16": "bf16", "fp16": "fp16",
          "fp32": "fp32", "fp64": "fp64", "tf32": "tf32", "int8": "int8", "fp8 e4m3": "fp8e4m3"}
NUMBER = r"(\d[\d,]*(?:\.\d+)?)"
FIGURE = re.compile(r"\b(HBM|DRAM|L1|L2|L3|bf16|fp16|fp32|fp64|tf32|int8|fp8\s+e4m3)\s+" + NUMBER
                    + r"(?:\s*/\s*" + NUMBER + r")?(?![\d,.]*\s*(?:[KMG]iB|MHz|%|x\b))")
UNIT = re.compile(r"\b(GB/s|GFLOP/s|TFLOP/s|GOP/s|TOP/s)")


def run_files(run: str) -> tuple[dict, dict]:
    folder = ROOT / "results" / run
    roofs = json.loads((folder / "roofs.json").read_text())
    return json.loads((folder / "run.json").read_text()), {r["name"]: r for r in roofs["roofs"]
                                                           if r.get("source") == "measured"}


def near(shown: str, value: float) -> bool:
    """Return whether a figure as written (1,507 or 83.1) is value rounded to its digits."""
    digits = len(shown.split(".")[1]) if "." in shown else 0
    return abs(float(shown.replace(",", "")) - value) <= 0.5 * 10 ** -digits + 1e-9


def check_run_text(text: str, run: str) -> int:
    """Assert every figure text quotes about run is the run's own; return how many were checked."""
    meta, roofs = run_files(run)
    device, checked = meta["device"], 0
    for m in FIGURE.finditer(text):
        label, burst, sustained = re.sub(r"\s+", " ", m.group(1)), m.group(2), m.group(3)
        unit = UNIT.search(text, m.end())
        assert unit, f"{run}: no unit after {m.group(0)!r}"
        scale = 1000 if unit.group(1).startswith("T") else 1
        roof = roofs[LABELS[label]]
        assert near(burst, roof["value"] / scale), f"{run}: {m.group(0)!r} but roofs.json has {roof['value']:.4g}"
        if sustained:
            value = roof["extra"]["sustained"]["value"]
            assert near(sustained, value / scale), f"{run}: {m.group(0)!r} but the sustained figure is {value:.4g}"
        checked += 1
    made_by = re.search(r"\bmethod (\d+)\b", text)  # the first names the run's own; later ones, what came after
    assert made_by and int(made_by.group(1)) == meta["method_version"], \
        f"{run} was made by method {meta['method_version']}"
    for pattern, value in ((r"([\d,]+) rows", meta.get("point_count")),
                           (r"\b(?:in|rows,) (\d+) s\b", round(meta["measure_wall_s"])),
                           (r"(\d+)-core", device.get("compute_units")),
                           (r"(\d+) MiB L3", {c["name"]: c["total_bytes"] >> 20 for c in device["caches"]}.get("l3")),
                           (r"([\d,]+) MHz", round(device.get("max_clock_mhz") or 0)),
                           (r"torch (\d[^\s,;)]*)", device.get("software", meta.get("software", {})).get("torch"))):
        for m in re.finditer(pattern, text):
            assert str(value) == m.group(1).replace(",", ""), f"{run}: the docs say {m.group(0)!r}; it was {value}"
            checked += 1
    flags = set(device.get("cpu_flags") or [])
    for phrase, flag, present in (("BF16", "avx512_bf16", True), ("VNNI", "avx512_vnni", True),
                                  ("no AVX512-FP16", "avx512_fp16", False)):
        if phrase in text:
            assert (flag in flags) == present, f"{run}: the docs say {phrase}; its flags say otherwise"
    if device["kind"] == "cpu":
        assert device["name"] in " ".join(text.split()), f"{run}: the docs do not name its CPU, {device['name']}"
    return checked


def test_the_reference_runs_quote_their_runs():
    text = section("REFERENCE.md", "The reference runs")
    paragraphs = [p for p in text.split("\n\n") if p.startswith("**")]
    assert len(paragraphs) >= 2
    for p in paragraphs:
        runs = list(dict.fromkeys(re.findall(r"results/([\w-]+)/", p)))
        # a paragraph's figures are its first run's; a run named after them is only named
        assert check_run_text(p.split(f"`results/{runs[1]}/`")[0] if len(runs) > 1 else p, runs[0]) >= 8


def test_the_results_table_says_which_method_made_each_run():
    rows = [r for r in DOCS["results/README.md"].splitlines() if r.startswith("| `")]
    # the committed runs only: a run the user made here (ignored by git) is not the table's
    tracked = subprocess.run(["git", "ls-files", "results/*/run.json"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    runs = {Path(p).parent.name for p in tracked}
    assert {re.match(r"\| `([^`]+)`", r).group(1) for r in rows} == runs
    for row in rows:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        run = cells[0].split("`")[1]
        meta = json.loads((ROOT / "results" / run / "run.json").read_text())
        assert cells[1] == f"method {meta['method_version']}", run
        by = json.loads((ROOT / "results" / run / "roofs.json").read_text()).get("derived_by", {})
        assert cells[2] == f"method {by.get('method_version', meta['method_version'])}", run
        for name in re.findall(r"derived/([\w-]+)/", cells[3]):
            assert (ROOT / "results" / run / "derived" / name).is_dir(), (run, name)
        # each "A -> B" in what changed: A a roof of the run's own roofs.json, B one of its re-derived folder's
        derived = re.findall(r"derived/([\w-]+)/", cells[3])
        for before, after in re.findall(r"([\d,.]+) -> ([\d,.]+)", cells[4]):
            own = _roof_values(ROOT / "results" / run / "roofs.json")
            new = _roof_values(ROOT / "results" / run / "derived" / derived[-1] / "roofs.json")
            assert _figure(before) in own and _figure(after) in new, (run, before, after)


def _roof_values(path) -> set[float]:
    """Return the measured roofs' values of a roofs.json as written in a doc: one decimal, and whole."""
    roofs = json.loads(path.read_text())["roofs"]
    vals = [r["value"] for r in roofs if r["source"] == "measured"]
    return {round(v, 1) for v in vals} | {float(round(v)) for v in vals}


def _figure(text: str) -> float:
    return float(text.replace(",", ""))
