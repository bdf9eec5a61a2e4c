"""`seqtasks translate` and `seqtasks evaluate` end to end, in process, on a tiny dates model."""

from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path

import pytest
import sacrebleu
import torch
from conftest import REPO, fit_in_process, relabel

from seqtasks.cli.report_progress import EVERY, VARIABLE, ReportProgress
from seqtasks.metrics.formats import JSON_DECIMALS, rounded

pytestmark = pytest.mark.slow


@pytest.fixture
def evaluate(run_command):
    """evaluate(checkpoint, src, ref, *options) -> (status, stdout, stderr) of `seqtasks
    evaluate translation` on one checkpoint and a source/reference pair."""

    def run(checkpoint: Path, src: Path, ref: Path, *options: str) -> tuple[int, str, str]:
        files = ("--checkpoint", str(checkpoint), "--src", str(src), "--ref", str(ref))
        return run_command("evaluate", "translation", *files, *options)

    return run


@pytest.fixture(scope="module")
def dates(tmp_path_factory) -> tuple[Path, Path]:
    """(checkpoint, data folder) of a small dates model trained for 30 steps with the CLI."""
    root = tmp_path_factory.mktemp("dates")
    fit_in_process(
        *("--config", str(REPO / "configs/translation/dates.yaml")),
        *("--data.init_args.data_dir", str(root / "data"), "--data.init_args.num_train", "600"),
        *("--trainer.default_root_dir", str(root / "runs"), "--trainer.max_steps", "30"),
        *("--trainer.logger", "false", "--trainer.callbacks", "[]"),
        *("--trainer.enable_checkpointing", "true"),
    )
    checkpoints = sorted((root / "runs").glob("**/*.ckpt"))
    assert checkpoints, "fit left no checkpoint"
    return checkpoints[-1], root / "data"


def test_translate_keeps_line_count_and_order_with_empty_and_huge_lines(dates, run_command, caplog):
    checkpoint, _ = dates
    lines = ["march 3, 1999", "", "the first of may 2001", " ".join(["nine"] * 1000), "   "]
    with caplog.at_level(logging.WARNING):
        status, stdout, stderr = run_command(
            "translate",
            "--checkpoint",
            str(checkpoint),
            "--beam",
            "3",
            stdin="\n".join(lines) + "\n",
        )
    assert status == 0, stderr[-3000:]
    out = stdout.split("\n")[:-1]
    assert len(out) == len(lines)
    assert out[1] == "" and out[4] == ""
    assert out[0] and out[2] and out[3]  # the 1,000-word line is cut, not dropped
    assert "cut to" in caplog.text


def test_translate_nbest_and_output_file(dates, tmp_path, run_command):
    checkpoint, _ = dates
    source = tmp_path / "in.txt"
    source.write_text("march 3, 1999\n2 june 1950\n")
    output = tmp_path / "out.txt"
    status, _, stderr = run_command(
        "translate",
        "--checkpoint",
        str(checkpoint),
        "--input",
        str(source),
        "--output",
        str(output),
        "--beam",
        "4",
        "--n-best",
        "3",
        "--attention-plots",
        str(tmp_path / "plots"),
    )
    assert status == 0, stderr[-3000:]
    rows = output.read_text().splitlines()
    assert [row.split(" ||| ")[0] for row in rows] == ["0"] * 3 + ["1"] * 3
    scores = [float(row.split(" ||| ")[2]) for row in rows[:3]]
    assert scores == sorted(scores, reverse=True)
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "line00001.png",
        "line00002.png",
    ]


def test_evaluate_json_and_length_table(dates, tmp_path, evaluate, run_command):
    """The report's figures against sacreBLEU called directly on the translations it wrote:
    cased 13a BLEU, chrF, lower-cased BLEU, and BLEU of each source-length bucket."""
    checkpoint, data = dates
    status, stdout, stderr = evaluate(
        checkpoint,
        data / "test.text",
        data / "test.iso",
        *("--beam", "2", "--buckets", "3", "--json", "--output", str(tmp_path / "out.txt")),
        *("--length-plot", str(tmp_path / "length.png")),
    )
    assert status == 0, stderr[-3000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    assert report["sentences"] == 1000
    assert "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in report["signature"]

    sources = (data / "test.text").read_text(encoding="utf-8").splitlines()
    references = (data / "test.iso").read_text(encoding="utf-8").splitlines()
    hypotheses = Path(report["output"]).read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == 1000
    bleu = sacrebleu.corpus_bleu(hypotheses, [references])  # 13a: "1948-03-21" is 5 tokens
    assert 0.0 < bleu.score < 100.0, "30 steps: the dates are neither all right nor all wrong"
    assert report["bleu"] == pytest.approx(bleu.score)
    assert report["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hypotheses, [references]).score)
    lowercased = sacrebleu.corpus_bleu(hypotheses, [references], lowercase=True).score
    assert report["bleu_lowercase"] == pytest.approx(lowercased)
    exact = sum(h == r for h, r in zip(hypotheses, references))
    assert report["exact_match"] == pytest.approx(100 * exact / 1000)
    assert f"exact match = {100 * exact / 1000:.2f} %" in stdout.splitlines()
    short = [i for i, source in enumerate(sources) if len(source.split()) <= 3]
    long = sorted(set(range(1000)) - set(short))
    expected = []
    for low, high, rows in ((1, 3, short), (4, None, long)):
        score = sacrebleu.corpus_bleu(
            [hypotheses[i] for i in rows], [[references[i] for i in rows]]
        )
        expected.append({"low": low, "high": high, "sentences": len(rows), "bleu": score.score})
    close = [{**b, "bleu": pytest.approx(b["bleu"], abs=1e-6)} for b in expected]
    assert report["by_length"] == close  # JSON keeps 6 decimals
    assert (tmp_path / "length.png").stat().st_size > 0

    # the file it wrote, scored again as a file of translations: the same report
    scored = ("evaluate", "translation", "--src", str(data / "test.text"), "--ref")
    status, stdout, _ = run_command(*scored, str(data / "test.iso"), "--hyp", report["output"],
                                    "--buckets", "3", "--json")  # fmt: skip
    again = json.loads(stdout.strip().splitlines()[-1])
    assert status == 0 and again["hyp_file"] == report["output"] and "beam" not in again
    kept = ("bleu", "chrf", "bleu_lowercase", "signature", "sentences", "by_length")
    assert {k: again[k] for k in kept} == {k: report[k] for k in kept}
    status, _, err = run_command(*scored, str(data / "test.iso"), "--hyp", str(data / "val.iso"))
    assert status == 2 and f"{data / 'val.iso'} has " in err and "give the translations of" in err


def test_evaluate_rejects_misaligned_files_naming_both_counts(dates, tmp_path, evaluate):
    checkpoint, data = dates
    ref = tmp_path / "short.iso"
    ref.write_text("2000-01-01\n")
    status, _, stderr = evaluate(checkpoint, data / "test.text", ref)
    assert status == 2
    assert "has 1000 lines" in stderr and "short.iso has 1\n" in stderr


@pytest.mark.parametrize("kind", ["garbage", "missing", "other_task", "not_seqtasks"])
def test_bad_checkpoints_get_a_clear_message(dates, tmp_path, kind, run_command, capsys):
    path = tmp_path / "model.ckpt"
    if kind == "garbage":
        path.write_bytes(b"\x00not a checkpoint")
    elif kind == "other_task":
        checkpoint = torch.load(dates[0], map_location="cpu", weights_only=False)
        relabel(checkpoint, "parsing")
        torch.save(checkpoint, path)
    elif kind == "not_seqtasks":
        torch.save({"state_dict": {}}, path)
    expected = {
        "garbage": "not a readable PyTorch checkpoint",
        "other_task": "is a parsing checkpoint, not a translation one",
        "not_seqtasks": "was not written by seqtasks",
    }.get(kind)
    if kind == "missing":  # an argument error, said before anything is imported
        with pytest.raises(SystemExit) as done:
            run_command("translate", "--checkpoint", str(path), stdin="march 3, 1999\n")
        stderr = capsys.readouterr().err
        assert done.value.code == 2 and stderr.splitlines()[-1].endswith(
            f"error: argument --checkpoint: no such checkpoint or model folder: {path}"
        )
        return
    status, _, stderr = run_command("translate", "--checkpoint", str(path), stdin="march 3, 1999\n")
    assert status == 2
    assert stderr.startswith("error: ") and expected in stderr


def test_translate_n_best_gives_an_empty_line_one_empty_translation(dates, run_command):
    """An empty line's n-best list is its one empty translation, not that translation again as
    its own alternatives; other lines list n different outputs."""
    checkpoint, _ = dates
    status, stdout, stderr = run_command(
        "translate", "--checkpoint", str(checkpoint), "--beam", "3", "--n-best", "2",
        stdin="march 3, 1999\n\n2 june 1950\n",
    )  # fmt: skip
    assert status == 0, stderr[-3000:]
    rows = [row.split(" ||| ") for row in stdout.splitlines()]
    assert [row[0] for row in rows] == ["0", "0", "1", "2", "2"]
    assert rows[2] == ["1", "", "0.0000"]
    assert rows[0][1] != rows[1][1] and rows[3][1] != rows[4][1]


def progress_of(stderr: str) -> list[str]:
    """What `seqtasks evaluate translation` said of its progress on stderr, without the
    prefix."""
    prefix = "evaluate translation: "
    return [line.removeprefix(prefix) for line in stderr.splitlines() if line.startswith(prefix)]


def test_evaluate_says_how_far_it_has_got_on_stderr_and_keeps_stdout_the_report(
    dates, evaluate, monkeypatch
):
    """Loading, decoding (how many sentences, then how many are done and how fast) and scoring,
    in order, on stderr; stdout the same report whether progress lines came or not, ending
    with the JSON line."""
    checkpoint, data = dates
    src, ref = data / "test.text", data / "test.iso"
    options = ("--beam", "2", "--max-tokens", "300", "--json")
    monkeypatch.setenv(VARIABLE, "0")  # a line at every batch
    status, stdout, stderr = evaluate(checkpoint, src, ref, *options)
    assert status == 0, stderr[-3000:]
    said = progress_of(stderr)
    assert said[0] == f"loading {checkpoint}" and said[1].startswith("done in ")
    assert said[2] == f"decoding 1,000 sentences with {checkpoint} (beam 2)"
    assert said[-3].startswith("done, 1,000 sentences in ")
    assert said[-2] == "scoring" and said[-1].startswith("done in ")
    counted = r"([\d,]+)/1,000 sentences \(\d+ %\)  elapsed \S+  eta \S+  [\d,.]+ sentences/s"
    done = [int(re.fullmatch(counted, one).group(1).replace(",", "")) for one in said[3:-3]]
    assert len(done) > 3 and done == sorted(done) and done[-1] == 1000

    monkeypatch.setenv(VARIABLE, "600")  # no line between a stage's start and its end
    status, quiet, stderr = evaluate(checkpoint, src, ref, *options)
    assert status == 0 and len(progress_of(stderr)) == 6
    assert quiet == stdout
    assert not progress_of(stdout) and json.loads(stdout.splitlines()[-1])["sentences"] == 1000


def test_a_stage_says_it_is_working_at_least_every_interval_even_without_counting(
    monkeypatch, capsys
):
    """A clock writes the progress line while a stage works, counted or not; the default
    interval stays under the 30 s of silence that reads as a hang."""
    assert 0 < EVERY <= 30
    monkeypatch.setenv(VARIABLE, "0.05")
    progress = ReportProgress("evaluate x")
    with progress.stage("scoring"):
        time.sleep(0.3)
    with progress.stage("decoding 10 sentences", 10, "sentences") as stage:
        stage.advance(4)
        time.sleep(0.3)
    lines = capsys.readouterr().err.splitlines()
    scoring = lines[: lines.index("evaluate x: decoding 10 sentences")]
    assert scoring[0] == "evaluate x: scoring" and scoring[-1] == "evaluate x: done in 0:00"
    assert len(scoring) > 3 and set(scoring[1:-1]) == {"evaluate x: still working  elapsed 0:00"}
    decoding = lines[len(scoring) + 1 : -1]
    assert len(decoding) > 1 and lines[-1] == "evaluate x: done, 4 sentences in 0:00"
    tick = r"evaluate x: 4/10 sentences \(40 %\)  elapsed 0:00  eta 0:00  [\d,.]+ sentences/s"
    assert all(re.fullmatch(tick, line) for line in decoding), decoding


def test_a_progress_interval_that_is_no_number_of_seconds_is_refused(dates, evaluate, monkeypatch):
    checkpoint, data = dates
    monkeypatch.setenv(VARIABLE, "soon")
    status, stdout, stderr = evaluate(checkpoint, data / "test.text", data / "test.iso")
    assert (status, stdout) == (2, "")
    assert stderr == f"error: ${VARIABLE} must be a number of seconds, 0 or more; got 'soon'\n"


def test_evaluate_counts_exact_matches_against_the_reference_lines(dates, tmp_path, run_command):
    """Exact match: the % of translations equal to their reference line, every 7th line here."""
    _, data = dates
    references = (data / "test.iso").read_text(encoding="utf-8").splitlines()
    translations = [r if i % 7 == 0 else r[:-1] + ("2" if r[-1] == "1" else "1")
                    for i, r in enumerate(references)]  # fmt: skip
    hyp = tmp_path / "hyp.iso"
    hyp.write_text("".join(t + "\n" for t in translations), encoding="utf-8")
    exact = sum(t == r for t, r in zip(translations, references))
    assert exact == 143
    status, stdout, stderr = run_command(
        "evaluate", "translation", "--src", str(data / "test.text"), "--ref",
        str(data / "test.iso"), "--hyp", str(hyp), "--json",
    )  # fmt: skip
    assert status == 0, stderr[-3000:]
    assert "exact match = 14.30 %" in stdout.splitlines()
    assert json.loads(stdout.splitlines()[-1])["exact_match"] == pytest.approx(14.3)


def test_json_scores_keep_six_decimals_not_float_noise(dates, run_command):
    """The references scored as their own translations: BLEU 100.0 in JSON, not the
    100.00000000000004 sacreBLEU computes, and no score with more than 6 decimals."""
    _, data = dates
    ref = str(data / "test.iso")
    status, stdout, stderr = run_command(
        "evaluate", "translation", "--src", str(data / "test.text"), "--ref", ref, "--hyp", ref,
        "--json",
    )  # fmt: skip
    assert status == 0, stderr[-3000:]
    line = stdout.splitlines()[-1]
    report = json.loads(line)
    assert (report["bleu"], report["chrf"], report["exact_match"]) == (100.0, 100.0, 100.0)
    assert '"bleu": 100.0,' in line and "100.0000" not in line
    numbers = [value for value in re.findall(r"[:\[,] (-?\d+\.\d+)", line)]
    assert numbers and all(len(n.split(".")[1]) <= JSON_DECIMALS for n in numbers), numbers


def test_rounded_rounds_every_float_of_a_report_and_nothing_else():
    report = {"f1": 100.00000000000004, "by": [{"bleu": 1 / 3}], "n": 7, "ok": True,
              "name": "x", "none": None, "pair": (0.1 + 0.2, 2)}  # fmt: skip
    assert rounded(report) == {"f1": 100.0, "by": [{"bleu": 0.333333}], "n": 7, "ok": True,
                               "name": "x", "none": None, "pair": [0.3, 2]}  # fmt: skip
    assert repr(rounded(0.1 + 0.2)) == "0.3"
