"""No value becomes a command: `accelbench sbatch` with hostile values (a newline, `$(...)`,
backticks, `;`, spaces, quotes, '#') either refuses them with one line and exit 2, writing no
script, or writes a script that bash runs with every value arriving as the value it was. Each
written script is run under bash with `srun` and `scontrol` replaced by stubs earlier on PATH
(the point is the shell's parsing, not Slurm's scheduling), and nothing it should not make is
made. The #SBATCH lines are read back as sbatch reads them (`slurm_arguments`, after Slurm's
src/sbatch/opt.c `_get_argument`), so a path with a space stays one path there too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelbench.cli.main import main
from accelbench.parallel.slurm import slurm_quote

MARK = "pwned"  # what an injected command would make
HOSTILE = ("a b", f"$(touch {MARK})", f"`touch {MARK}`", f"x; touch {MARK}", "it's \"q\"",
           "c#d", "$HOME", f"e && touch {MARK} #")


def slurm_arguments(line: str) -> list[str]:
    """The arguments sbatch reads from one #SBATCH line: whitespace splits, ' or " group, a
    backslash escapes the next character, an unquoted '#' starts a comment."""
    args, current, quote, escape, started = [], [], "", False, False
    for ch in line[len("#SBATCH"):]:
        if escape:
            current.append(ch)
            escape, started = False, True
        elif ch == "\\":
            escape = True
        elif quote:
            if ch == quote:
                quote = ""
            else:
                current.append(ch)
        elif ch in "\"'":
            quote, started = ch, True
        elif ch == "#":
            break
        elif ch.isspace():
            if started:
                args.append("".join(current))
            current, started = [], False
        else:
            current.append(ch)
            started = True
    assert not quote, f"unmatched quote in {line!r}"
    return args + (["".join(current)] if started else [])


def _directives(script: str) -> dict[str, str]:
    """--name=value of every #SBATCH line, as sbatch reads them."""
    found = {}
    for line in script.splitlines():
        if line.startswith("#SBATCH"):
            (arg,) = slurm_arguments(line)
            name, _, value = arg.partition("=")
            found[name] = value
    return found


def _run(monkeypatch, capsys, argv: list[str]) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["accelbench", "sbatch", *argv])
    with pytest.raises(SystemExit) as stop:
        main()
    out, err = capsys.readouterr()
    return stop.value.code, out, err


def _stubs(folder: Path) -> Path:
    """srun records its arguments (NUL-separated) and does nothing; scontrol names a node."""
    bin_dir = folder / "stub-bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text('#!/bin/bash\nprintf \'%s\\0\' "$@" > "$SRUN_ARGS"\n')
    (bin_dir / "scontrol").write_text("#!/bin/bash\necho node1\n")
    for stub in bin_dir.iterdir():
        stub.chmod(0o755)
    return bin_dir


def _run_script(script: str, folder: Path, cwd: Path) -> list[str]:
    """Run the script under bash with the stubs first on PATH; srun's arguments."""
    (folder / "job.sh").write_text(script)
    record = folder / "srun.args"
    env = {**os.environ, "PATH": f"{_stubs(folder)}:{os.environ['PATH']}",
           "SRUN_ARGS": str(record), "SLURM_JOB_NODELIST": "node1", "SLURM_CPUS_PER_TASK": "2",
           "SLURM_JOB_ID": "7"}
    done = subprocess.run(["bash", str(folder / "job.sh")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return record.read_bytes().decode().split("\0")[:-1]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_paths_and_values_arrive_as_given_and_run_nothing(value, monkeypatch, capsys,
                                                                   tmp_path):
    work = tmp_path / f"work {value}"  # the working folder: #SBATCH --chdir
    work.mkdir()
    monkeypatch.chdir(work)
    db = tmp_path / f"db {value}" / "r.db"
    code, script, err = _run(monkeypatch, capsys, [
        "--nodes", "1", "--gpus-per-node", "0", "--log-dir", f"logs {value}", "--", "train",
        "--model", "gpt2-tiny", "--seq", "16", "--data", f"shards {value}", "--db", str(db)])
    assert code == 0, err
    sbatch = _directives(script)
    assert sbatch["--chdir"] == str(work)
    assert sbatch["--output"] == f"{work}/logs {value}/%x-%j.out"
    assert sbatch["--error"] == f"{work}/logs {value}/%x-%j.err"
    srun = _run_script(script, tmp_path, work)
    command = srun[srun.index("-m", srun.index("--rdzv-id=7")) :]
    assert command == ["-m", "accelbench", "train", "--model", "gpt2-tiny", "--seq", "16",
                       "--data", f"shards {value}", "--db", str(db)]
    assert "--cpus-per-task=2" in srun and srun[srun.index("--rdzv-id=7") - 1].endswith(":29500")
    assert not [p for p in tmp_path.rglob(MARK)], "an injected command ran"
    assert not Path(MARK).exists()


@pytest.mark.parametrize("argv,expected", [
    (["--log-dir", f"logs\ntouch {MARK}\n#"], "error: log-dir: 'logs\\ntouch pwned\\n#' holds "
     "the control character '\\n'"),
    (["--log-dir", "logs%j"], "error: log-dir: 'logs%j' holds '%' or '\\'"),
    (["--log-dir", "logs\\x"], "error: log-dir: 'logs\\\\x' holds '%' or '\\'"),
    (["--log-dir", "hetjob"], "error: log-dir: 'hetjob' holds 'packjob' or 'hetjob'"),
    (["--job-name", f"j; touch {MARK}"], "error: job-name: 'j; touch pwned' is not a Slurm name"),
    (["--job-name", "a/b"], "error: job-name: 'a/b' is not a Slurm name"),
    (["--partition", "gpu,$(id)"], "error: partition: 'gpu,$(id)' is not a Slurm name"),
    (["--account", "acct\n#SBATCH --x"], "error: account: 'acct\\n#SBATCH --x' is not a Slurm "
     "name"),
    (["--", "train", "--data", f"x\ntouch {MARK}"], "error: command: 'x\\ntouch pwned' holds the "
     "control character '\\n'"),
    (["--", "train", "--db", "r\r.db"], "error: command: 'r\\r.db' holds the control character"),
    (["--", "train", "--model", "no-such-model"], "error: model: unknown preset 'no-such-model'"),
    (["--", "train", "--model", "gpt2", "--seq", "4096"], "error: seq: 4096 is longer than the "
     "model's 1024 positions"),
    (["--", "train", "--micro-batch", "0"], "error: micro-batch: must be positive, got 0"),
    (["--", "train", "--dtype", "fp64"], "error: dtype: unknown value 'fp64'"),
    (["--", "train", "--trials", "0"], "error: trials: must be a whole number >= 1"),
    (["--", "train", "--gas", "100000"], "error: gas: 100,000 is over the bound of 16,384"),
    (["--", "train", "--steps", "1000000"], "error: steps: must be a whole number from 1 to "
     "100,000, got 1000000"),
])
def test_hostile_or_bad_values_are_refused_before_the_script(argv, expected, monkeypatch, capsys,
                                                              tmp_path):
    monkeypatch.chdir(tmp_path)
    if "--" not in argv:
        argv = [*argv, "--", "train", "--model", "gpt2-tiny", "--seq", "16"]
    code, out, err = _run(monkeypatch, capsys, ["--nodes", "1", "--gpus-per-node", "0", *argv])
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith(expected), err
    assert "allowed:" in err
    assert not list(tmp_path.iterdir())  # no log folder, no script, no database


def test_a_working_folder_slurm_cannot_read_is_refused(monkeypatch, capsys, tmp_path):
    work = tmp_path / "run%j"
    work.mkdir()
    monkeypatch.chdir(work)
    code, out, err = _run(monkeypatch, capsys, ["--nodes", "1", "--", "train"])
    assert (code, out) == (2, "") and err.startswith(f"error: chdir: '{work}' holds '%'"), err


def test_a_database_under_a_file_is_refused(monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    code, out, err = _run(monkeypatch, capsys, ["--nodes", "1", "--gpus-per-node", "0", "--",
                                                "train", "--db", "afile/r.db"])
    assert (code, out) == (2, "") and err.startswith(f"error: db: {tmp_path}/afile/r.db cannot "
                                                     "be written"), err


@pytest.mark.parametrize("value", ["plain", "a b", 'q"uote', "back\\slash", "h#ash", "it's"])
def test_slurm_quote_reads_back_as_the_value(value):
    assert slurm_arguments(f"#SBATCH --x={slurm_quote(value)}") == [f"--x={value}"]


def test_slurm_quote_refuses_a_newline():
    with pytest.raises(ValueError, match="control character"):
        slurm_quote("a\nb")
