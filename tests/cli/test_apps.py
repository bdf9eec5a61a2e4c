"""`seqtasks translate` and `seqtasks evaluate` end to end, in process, on a tiny dates model."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import sacrebleu
import torch
from conftest import REPO, fit_in_process, relabel

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
    short = [i for i, source in enumerate(sources) if len(source.split()) <= 3]
    long = sorted(set(range(1000)) - set(short))
    expected = []
    for low, high, rows in ((1, 3, short), (4, None, long)):
        score = sacrebleu.corpus_bleu(
            [hypotheses[i] for i in rows], [[references[i] for i in rows]]
        )
        expected.append({"low": low, "high": high, "sentences": len(rows), "bleu": score.score})
    assert report["by_length"] == [{**b, "bleu": pytest.approx(b["bleu"])} for b in expected]
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
def test_bad_checkpoints_get_a_clear_message(dates, tmp_path, kind, run_command):
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
        "missing": "no such checkpoint",
        "other_task": "is a parsing checkpoint, not a translation one",
        "not_seqtasks": "was not written by seqtasks",
    }[kind]
    status, _, stderr = run_command("translate", "--checkpoint", str(path), stdin="march 3, 1999\n")
    assert status == 2
    assert stderr.startswith("error: ") and expected in stderr
