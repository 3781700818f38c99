"""The end-of-run summary, the report and roofs.json name the same roofs,
on a synthetic run with a missing level (conftest.py's nodram, tests/noroof.py: run_a without its DRAM sizes, so
roofs.json has cache and compute roofs, and a note on dram). A note on a roof the file holds
is never printed as "no roof"; every "no roof" names a level roofs.json has no roof for."""
import json
import re

from bench.results import load_run
from roofs.analysis.checks import note_subject, split_notes
from roofs.reports.brief import brief
from roofs.reports.report import write_report
from roofs.reports.summary import summary


def _section(md: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", md, re.S | re.M)
    return m.group(1) if m else ""


def test_summary_report_and_roofs_json_name_the_same_roofs(nodram):
    doc = json.loads((nodram / "roofs.json").read_text())
    measured = {r["name"] for r in doc["roofs"] if r["source"] == "measured"}
    missing = {note_subject(n) for n in doc["notes"] if note_subject(n) and note_subject(n) not in measured}
    # run_a's L1 sizes (32-64 KiB: 459, 448 GB/s) read within the 15% level step of its L2
    # plateau (about 400), so they are one plateau with it, l2's, and l1 has a note, no roof
    assert "dram" not in measured and "dram" in missing and {"l2", "l3", "fp32"} <= measured

    run = load_run(nodram)
    text = summary(run)
    table = text.split("roofs: measured, each beside its datasheet or computed reference\n", 1)[1]
    table = table.split("\nno roof:")[0]
    rows = [line.split()[0] for line in table.splitlines()[1:]
            if line.strip() and not line.startswith(("references", "note:"))]
    assert set(rows) == measured, (sorted(rows), sorted(measured))
    no_roof = {note_subject(line[len("no roof: "):]) for line in text.splitlines() if line.startswith("no roof: ")}
    assert no_roof == missing and not no_roof & measured

    md = (write_report(nodram)[0]).read_text()
    validation = [line.split("|")[1].strip() for line in _section(md, "Validation").splitlines()
                  if line.startswith("| ") and not line.startswith("| ceiling")]
    assert set(validation) == measured, (sorted(validation), sorted(measured))
    without = {note_subject(line[2:]) for line in _section(md, "Levels without a roof").splitlines()
               if line.startswith("- ")}
    assert without == missing

    lines = brief(nodram).splitlines()
    assert {note_subject(line.strip()[len("no roof: "):]) for line in lines
            if line.strip().startswith("no roof: ")} == missing


def test_a_note_on_a_kept_roof_is_a_note_not_a_missing_roof(nodram, tmp_path):
    """The summary once listed an l1 roof and then "no roof: l1" (a candidate that lost to it):
    a note on l3, a roof the file holds, is a note."""
    d = tmp_path / "run"
    __import__("shutil").copytree(nodram, d)
    doc = json.loads((d / "roofs.json").read_text())
    assert "l3" in {r["name"] for r in doc["roofs"] if r["source"] == "measured"}
    note = "l3: probe.l1 (373.9 GB/s) is below the size-window roof (382.6)"
    doc["notes"].append(note)
    (d / "roofs.json").write_text(json.dumps(doc))
    run = load_run(d)
    missing, about = split_notes(run)
    assert not any(n.startswith("l3:") for n in missing) and any(n.startswith("l3: probe.l1") for n in about)
    text = summary(run)
    [line] = [line.strip() for line in text.splitlines() if note in line]   # printed once, as a note
    assert "no roof: l3:" not in text and line.startswith("note:")
