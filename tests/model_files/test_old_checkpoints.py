"""Checkpoints written before the redesign of issue 18 still work in every app, and say what
they said then.

`tests/fixtures/pre_redesign/` holds one tiny checkpoint per task (two for translation: RNN and
Transformer), written by commit df8c01b with `seqtasks fit` for 2 steps (README.md there says
how), and `expected.json`: what every app printed for them with that commit's code. Texts must
be equal and scores equal within 1e-4: a checkpoint that loads but computes something else
fails here. (The models are untrained, so their outputs are arbitrary but fixed.)
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from conftest import REPO, load_script

FIXTURES = REPO / "tests" / "fixtures" / "pre_redesign"
DATES = [
    "the twenty-first of march 1948",
    "sunday 30 jul 1995",
    "3 february 2004",
    "",
    "december the 1st , 1999",
]
REFERENCES = ["1948-03-21", "1995-07-30", "2004-02-03", "", "1999-12-01"]
SENTENCES = ["The dog barked .", "Stocks rose sharply in early trading .", "He said no ."]


def call(app: str, argv: list[str], capsys: pytest.CaptureFixture, stdin: str = "") -> str:
    """Run an app's main in this process; its standard output."""
    import io

    module = load_script(f"apps/{app}.py")
    capsys.readouterr()
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        status = module.main(argv)
    finally:
        sys.stdin = old
    captured = capsys.readouterr()
    assert status in (0, None), f"{app} {argv} exited with {status}: {captured.err[-2000:]}"
    return captured.out


def app_outputs(capsys: pytest.CaptureFixture, tmp: Path) -> dict:
    """What each app prints for each pre-redesign checkpoint, as plain data."""
    names = ("translation_rnn", "translation_transformer", "parsing", "captioning")
    ck = {name: str(FIXTURES / f"{name}.ckpt") for name in names}
    outputs: dict = {}
    src, ref = tmp / "dates.txt", tmp / "dates.iso"
    src.write_text("\n".join(DATES) + "\n")
    ref.write_text("\n".join(REFERENCES) + "\n")
    for name in ("translation_rnn", "translation_transformer"):
        for beam in (1, 3):
            out = call(
                "translate",
                ["--checkpoint", ck[name], "--beam", str(beam), "--n-best", str(beam)],
                capsys,
                stdin="\n".join(DATES) + "\n",
            )
            outputs[f"translate {name} beam {beam}"] = out.splitlines()
    averaged = tmp / "averaged.ckpt"
    copy = tmp / "copy.ckpt"
    shutil.copy(ck["translation_rnn"], copy)
    call("average_checkpoints", [ck["translation_rnn"], str(copy), "--out", str(averaged)], capsys)
    out = call(
        "translate",
        ["--checkpoint", str(averaged), "--beam", "3", "--n-best", "3"],
        capsys,
        stdin="\n".join(DATES) + "\n",
    )
    outputs["translate averaged translation_rnn beam 3"] = out.splitlines()
    out = call(
        "evaluate",
        ["translation", "--checkpoint", ck["translation_rnn"], ck["translation_transformer"]]
        + ["--src", str(src), "--ref", str(ref), "--beam", "3", "--json"],
        capsys,
    )
    report = json.loads(out.strip().splitlines()[-1])
    outputs["evaluate translation"] = [
        {k: r[k] for k in ("bleu", "chrf", "bleu_lowercase")} for r in report["models"]
    ]

    for beam in (1, 3):
        out = call(
            "parse",
            ["--checkpoint", ck["parsing"], "--pretokenized", "--beam", str(beam)],
            capsys,
            stdin="\n".join(SENTENCES) + "\n",
        )
        outputs[f"parse beam {beam}"] = out.splitlines()
    out = call(
        "evaluate",
        ["parsing", "--checkpoint", ck["parsing"], "--gold", str(FIXTURES / "dev5.mrg")]
        + ["--beam", "3", "--json"],
        capsys,
    )
    report = json.loads(out.strip().splitlines()[-1])
    outputs["evaluate parsing"] = {k: report[k] for k in ("f1", "recall", "precision")}

    images = sorted((FIXTURES / "shapes" / "images").glob("test_*.png"))
    for beam in (1, 3):
        out_file = tmp / f"captions{beam}.jsonl"
        call(
            "caption",
            [*map(str, images), "--checkpoint", ck["captioning"], "--beam", str(beam)]
            + ["--out", str(out_file)],
            capsys,
        )
        records = [json.loads(line) for line in out_file.read_text().splitlines()]
        outputs[f"caption beam {beam}"] = [
            {"image": Path(r["image"]).name, "caption": r["caption"], "score": r["score"]}
            for r in records
        ]
    out = call(
        "evaluate",
        ["captioning", "--checkpoint", ck["captioning"], "--source", str(FIXTURES / "shapes")]
        + ["--split", "test", "--beam", "3", "--no-meteor", "--json", "--device", "cpu"],
        capsys,
    )
    report = json.loads(out.strip().splitlines()[-1])
    outputs["evaluate captioning"] = {k: report[k] for k in ("cider", "bleu4", "exact_match")}
    return outputs


def close(expected, actual, path: str = "") -> None:
    """Equal, but floats (and the score in an n-best line) within 1e-4."""
    if isinstance(expected, dict):
        assert expected.keys() == actual.keys(), path
        for key in expected:
            close(expected[key], actual[key], f"{path}/{key}")
    elif isinstance(expected, list):
        assert len(expected) == len(actual), path
        for i, (e, a) in enumerate(zip(expected, actual)):
            close(e, a, f"{path}[{i}]")
    elif isinstance(expected, float):
        assert actual == pytest.approx(expected, rel=1e-4, abs=1e-4), path
    elif isinstance(expected, str) and expected.count(" ||| ") == 2:
        *text, score = expected.rsplit(" ||| ", 1)
        *text_a, score_a = actual.rsplit(" ||| ", 1)
        assert text == text_a, path
        assert float(score_a) == pytest.approx(float(score), rel=1e-4, abs=1e-4), path
    else:
        assert expected == actual, path


@pytest.mark.slow
def test_pre_redesign_checkpoints_say_what_they_said(capsys, tmp_path):
    expected = json.loads((FIXTURES / "expected.json").read_text())
    close(expected, app_outputs(capsys, tmp_path))


def test_class_paths_of_older_configs_still_resolve(tmp_path, capsys, monkeypatch):
    """A config written for seqtasks 0.1 names `seqtasks.schedules`, `seqtasks.callbacks` and
    `seqtasks.checkpoints`, since moved under `seqtasks.training`: it still parses, to the same
    classes."""
    from seqtasks.cli.main import main

    monkeypatch.setattr(sys, "argv", ["seqtasks"])
    config = (REPO / "configs/translation/transformer.yaml").read_text()
    old = config.replace("seqtasks.training.", "seqtasks.")
    assert old.count("seqtasks.schedules.InverseSqrtWarmup") == 1
    assert old.count("seqtasks.checkpoints.LastCheckpoint") == 1
    old = old.replace(
        "  callbacks:\n", "  callbacks:\n    - class_path: seqtasks.callbacks.FitSummary\n", 1
    )
    (tmp_path / "old.yaml").write_text(old)
    with pytest.raises(SystemExit) as stop:
        main(["fit", "--config", str(tmp_path / "old.yaml"), "--print_config"])
    assert stop.value.code in (0, None)
    printed = capsys.readouterr().out
    for name in (
        "schedules.InverseSqrtWarmup",
        "checkpoints.LastCheckpoint",
        "callbacks.FitSummary",
    ):
        assert f"seqtasks.training.{name}" in printed or f"seqtasks.{name}" in printed
