"""The edges of a command (`seqtasks.cli.streams`): a closed standard input or output is said
before any work, in one line, status 2; a full disk (a file or standard output) one line naming
what could not be written, status 1; a reader that goes away (`| head -1`) ends it quietly with
status 141, as a Unix tool that SIGPIPE ends. In this process for each command, and for real
(closed descriptors, a pipe closed after one line, with and without PYTHONUNBUFFERED) in a few
subprocesses."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, subprocess_env

from seqtasks.cli.commands import main

MODEL = REPO / "tests/fixtures/before_identity/translation_transformer.ckpt"  # dates, tiny
DATES = "the first of may 2001\nsunday 30 jul 1995\n"
FULL = Path("/dev/full")


def run(argv: list[str], capsys, stdin: io.TextIOBase | None = None) -> tuple[int, str, str]:
    """(status, stdout, stderr) of `seqtasks ARGV` in this process, `stdin` as standard input."""
    capsys.readouterr()
    old = sys.stdin
    sys.stdin = stdin
    try:
        status = main(argv)
    finally:
        sys.stdin = old
    out, err = capsys.readouterr()
    return status, out, err


def text(lines: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(lines.encode()))


@pytest.mark.parametrize(
    "argv, option",
    [
        (["translate", "--checkpoint", str(MODEL)], "give --input FILE, or "),
        (["parse", "--checkpoint", str(MODEL)], ""),
    ],
)
def test_a_closed_standard_input_is_said_before_any_work(argv, option, capsys):
    status, out, err = run(argv, capsys, stdin=None)
    assert (status, out) == (2, "")
    assert err == f"error: standard input is closed (<&-): {option}pipe the text in (< FILE)\n"


@pytest.mark.parametrize(
    "argv, option",
    [
        (["translate", "--checkpoint", str(MODEL)], "give --output FILE, or "),
        (["parse", "--checkpoint", str(MODEL)], ""),
        (["caption", "x.png", "--checkpoint", str(MODEL)], "give --out FILE, or "),
        (["evaluate", "parsing", "--gold", "g.mrg", "--pred", "p.mrg"], ""),
    ],
)
def test_a_closed_standard_output_is_said_before_any_work(argv, option, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdout", None)
    status, _, err = run(argv, capsys, stdin=text(DATES))
    assert status == 2
    assert err == f"error: standard output is closed (>&-): {option}send it to a file (> FILE)\n"


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full on this system")
def test_a_full_disk_is_one_line_naming_what_could_not_be_written(capsys, monkeypatch, tmp_path):
    """As a file (`--output /dev/full`, `--out`) and as standard output (`> /dev/full`); the
    scores of `evaluate` are printed before its translations are written, so they are not lost
    with the file."""
    src, ref = tmp_path / "src", tmp_path / "ref"
    src.write_text(DATES)
    ref.write_text("2001-05-01\n1995-07-30\n")
    full = "error: cannot write /dev/full: No space left on device\n"
    model = ["--checkpoint", str(MODEL)]
    for argv in (
        ["translate", *model, "--output", str(FULL)],
        [
            "evaluate",
            "translation",
            *model,
            "--src",
            str(src),
            "--ref",
            str(ref),
            "--output",
            str(FULL),
        ],  # fmt: skip
        ["average", str(MODEL), str(MODEL), "--out", str(FULL)],
    ):
        status, out, err = run(argv, capsys, stdin=text(DATES))
        assert (status, err.splitlines()[-1] + "\n") == (1, full), argv
        assert "Traceback" not in err
        assert ("BLEU = " in out) == (argv[0] == "evaluate"), out
    with open(FULL, "w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        status, _, err = run(["translate", *model], capsys, stdin=text(DATES))
    assert (status, err) == (1, "error: cannot write standard output: No space left on device\n")


class GoneReader(io.TextIOWrapper):
    """A standard output whose reader went away: every write is a broken pipe."""

    def __init__(self):
        super().__init__(io.BytesIO(), encoding="utf-8")
        self.buffer.write = self._broken  # type: ignore[method-assign]

    def _broken(self, data) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_reader_that_goes_away_ends_the_command_quietly(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdout", GoneReader())
    status, _, err = run(["translate", "--checkpoint", str(MODEL)], capsys, stdin=text(DATES))
    assert (status, err) == (141, "")


class Interrupted(io.TextIOBase):
    """Standard input that Ctrl-C interrupts while it is read."""

    def read(self, size: int | None = -1) -> str:
        raise KeyboardInterrupt

    readline = readlines = __next__ = read


def test_ctrl_c_ends_the_command_with_130_and_no_traceback(capsys, tmp_path):
    output = tmp_path / "out.txt"
    output.write_text("the last run's translations\n")
    argv = ["translate", "--checkpoint", str(MODEL), "--output", str(output)]
    try:
        status, out, err = run(argv, capsys, stdin=Interrupted())
    except KeyboardInterrupt:  # left to propagate, it would stop pytest itself
        pytest.fail("Ctrl-C escaped the command as a KeyboardInterrupt")
    assert (status, out, err) == (130, "", "interrupted\n")
    assert output.read_text() == "the last run's translations\n"


def seqtasks(args: str, env: dict | None = None, **options) -> subprocess.CompletedProcess:
    """`seqtasks ARGS` run by bash (for its redirections) in a process of its own."""
    command = f"{sys.executable} -m seqtasks {args}"
    environment = subprocess_env() | (env or {})
    return subprocess.run(
        ["bash", "-c", command], env=environment, cwd=REPO, timeout=300, **options
    )


@pytest.mark.slow
def test_closed_descriptors_for_real():
    closed_in = seqtasks(f"translate --checkpoint {MODEL} <&-", capture_output=True, text=True)
    assert closed_in.returncode == 2 and closed_in.stderr.startswith(
        "error: standard input is closed (<&-)"
    )
    closed_out = seqtasks(
        f"translate --checkpoint {MODEL} >&-", input=DATES, stderr=subprocess.PIPE, text=True
    )
    assert closed_out.returncode == 2 and closed_out.stderr.startswith(
        "error: standard output is closed (>&-)"
    )
    for result in (closed_in, closed_out):
        assert result.stderr.count("\n") == 1


@pytest.mark.slow
def test_a_pipe_closed_after_one_line_ends_the_command_with_141(tmp_path):
    """`seqtasks translate … | head -1` for real: a pipe of one page (so that a few hundred
    translations overflow it), closed by its reader after the first line; with
    PYTHONUNBUFFERED set, under which Python's own `sys.stdout.write` hands a pipe one write
    and drops, without an error, what the pipe does not take at once."""
    import fcntl
    import os

    source = tmp_path / "dates.txt"
    source.write_text(DATES * 300)
    read, write = os.pipe()
    fcntl.fcntl(write, 1031, 4096)  # F_SETPIPE_SZ: one page
    command = [sys.executable, "-m", "seqtasks", "translate", "--checkpoint", str(MODEL)]
    process = subprocess.Popen(
        [*command, "--beam", "1", "--input", str(source)],
        stdout=write,
        stderr=subprocess.PIPE,
        env=subprocess_env() | {"PYTHONUNBUFFERED": "1"},
        cwd=REPO,
    )
    os.close(write)
    with os.fdopen(read, "rb") as reader:
        reader.readline()
    assert process.wait(timeout=300) == 141
    assert process.stderr.read() == b""
