"""Write docs/bad-input.md: every case of tests/unit/test_bad_input.py run, with the one line
each refusal prints. Run it after changing a case or a message:

    python scripts/bad_input_table.py          # rewrite the page
    python scripts/bad_input_table.py --check  # exit 1 if the page is stale

tests/unit/test_bad_input.py checks the page is current, so the table cannot drift.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "bad-input.md"
SHOWN_DIR = "DIR"  # how the temporary folder of inputs is written in the page

HEADER = """# Bad input: what each refusal says

Bad input stops before anything runs: before a banner, a results file, a model or a
measurement. It gets one line on stderr, `error: <field>: <problem> (allowed: ...)`, nothing
on stdout, and exit code 2; the argument parser's own errors (an option given a value of the
wrong type, an unknown option) are one line and exit 2 too. The table below is every case of
`tests/unit/test_bad_input.py`, which checks all of that for each one (no database and no
other file made, no model built); the messages are what this version prints, written by
`scripts/bad_input_table.py` (do not edit this page by hand: run the script). The `results`
commands' `--db` checks (a database that is missing, not SQLite, another program's, read-only)
are in [results.md](results.md#durability).

One rule for names: precisions, recompute kinds, devices, model presets, layout words
(`sp=on`, `recompute=full`), operations and every other name are case-sensitive and written in
lower case, as the allowed values list them: `--dtype FP32` is refused like `--dtype fp64`,
never read as `fp32`. Units of sizes and counts (`24GiB`, `512mb`, `16M`) are read in any case.

Every count a user gives has a stated upper bound, refused past it like any bad value (the
table below), or is priced before anything runs: a sequence length by the model's positions and
the memory estimate, `--nproc` and scale's counts by this machine's cores or devices, a plan's
nodes by what any layout of the model occupies. The bounds:

BOUNDS_TABLE

A signal ends a command within 2 seconds: SIGINT or SIGTERM while it starts (imports torch,
checks its options) or measures (inside a step of 16,384 micro-batches too) gives one line (a
sweep's says what was kept) and exit code 130 or 143, the interpreter's own teardown skipped
(with torch loaded it took 4-6 s on this loaded 2-core AMD EPYC VM; the exit now comes 0.2-0.8
s after the signal; `tests/unit/test_bounds_signals.py` checks both phases). A launched cell's
ranks get 0.3 s after SIGTERM, then SIGKILL: there the exit came 1.0, 1.4 and (under load) 3.0
s after the signal in three runs of 2 gloo ranks, where it had taken 2.5-7 s. A `results
import` the database refuses (a full disk) removes the database file it made, so no empty
database is left behind.

`accelbench sbatch` writes no value into its script that the shell or Slurm could read as more
than that value: names (job name, partition, account) are Slurm words, paths on `#SBATCH` lines
(`--chdir`, `--output`, `--error`) are double-quoted as sbatch's own parser reads them (a space
is fine) and refused with a control character, `%`, a backslash or `packjob`/`hetjob`, and the
command's arguments are quoted for the shell and refused with a control character; the command's
model, sweep lists and layout are checked before the script is written.
`tests/unit/test_sbatch_hostile.py` runs each script it writes from hostile values under bash.

`DIR` is a folder holding these inputs:

| input | what it is |
|---|---|
"""


def _load_cases():
    """The test module, loaded from its path (tests/ is not a package)."""
    path = REPO / "tests" / "unit" / "test_bad_input.py"
    spec = importlib.util.spec_from_file_location("_bad_input_cases", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _code(text: str) -> str:
    """Text as a Markdown code span inside a table cell ('|' escaped, any backticks fenced)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or longest else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"


def _shown(word: str) -> str:
    """A command-line word as a shell user would type it: one with a control character in
    bash's $'...' quoting (a raw newline would break the table row)."""
    if word.isprintable():
        return word
    return "$'" + word.encode("unicode_escape").decode().replace("'", "\\'") + "'"


def _bounds() -> str:
    """The table of every count's bound, read from the constants the checks use."""
    from accelbench.config.study_options import MAX_RETRY_PASSES
    from accelbench.config.trial_count import MAX_TRIALS
    from accelbench.config.units import COUNT_BOUNDS
    from accelbench.parallel.sbatch_options import MAX_NODES, MAX_PER_NODE

    why = {"steps": "each step's time, loss, lr and data wait are kept in the record",
           "gas": "a step's micro-batches are stacked: gas x micro-batch sequences of ids",
           "micro-batch": "sequences in one micro-batch", "batch": "sequences in one batch",
           "repeats": "timed repetitions (block: a trial's, each in the record; calibrate: "
                      "a point's)",
           "warmup": "untimed repetitions (block: a trial's; calibrate: a point's)",
           "devices": "one process a device", "threads": "calibrate's CPU threads",
           "tokens": "calibrate's GEMM rows (batch x sequence) of one product"}
    rows = [f"| `--{name}` | {bound:,} | {why[name]} |" for name, bound in COUNT_BOUNDS.items()]
    rows += [f"| `--trials` | {MAX_TRIALS:,} | each trial builds the model anew and warms up |",
             f"| sbatch `--nodes` | {MAX_NODES:,} | more nodes than any machine has |",
             f"| sbatch `--gpus-per-node`, `--nproc-per-node`, `--cpus-per-task` | "
             f"{MAX_PER_NODE:,} | more than any node has |",
             f"| `--retry-disturbed` | {MAX_RETRY_PASSES} | each pass measures every disturbed "
             "cell again |"]
    return "\n".join(["| count | at most | why |", "|---|---|---|", *rows])


def render() -> str:
    """The page: the inputs, then one row per case (command, its options, the line printed)."""
    cases = _load_cases()
    lines = [HEADER.replace("BOUNDS_TABLE", _bounds()).rstrip("\n")]
    lines += [f"| {_code('DIR/' + name)} | {what} |" for name, what in cases.INPUTS.items()]
    lines += ["", "| command | input | message |", "|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cases.make_inputs(folder)
        for case in cases.CASES:
            code, out, err = cases.run_case(case, folder)
            if code != 2 or out or err.count("\n") != 1:
                raise SystemExit(f"{' '.join(case.argv)}: not a one-line refusal "
                                 f"(exit {code}): {err or out}")
            message = err.rstrip("\n").replace(str(folder), SHOWN_DIR)
            words = [_shown(w.replace("{dir}", SHOWN_DIR)) for w in case.argv]
            command = words[0] if words[0] not in ("data", "results") else " ".join(words[:2])
            given = " ".join(words[len(command.split()):])
            lines.append(f"| {command} | {_code(given)} | {_code(message)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    """Rewrite docs/bad-input.md, or with --check say whether it is current."""
    text = render()
    if "--check" in sys.argv[1:]:
        current = DOC.exists() and DOC.read_text() == text
        print("docs/bad-input.md is " + ("current" if current else "stale: run the script"))
        return 0 if current else 1
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(REPO)} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
