"""`seqtasks caption` and `seqtasks evaluate captioning` end to end, in process, on a small
shapes model trained for a few steps with the CLI."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest
import torch
from conftest import REPO, fit_in_process, load_script, relabel

from seqtasks.cli import evaluate
from seqtasks.cli.report_progress import VARIABLE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shapes_model(tmp_path_factory) -> tuple[Path, Path]:
    """(checkpoint, shapes folder) of a soft-attention model trained for 3 steps, whose
    captions stop after 8 words."""
    root = tmp_path_factory.mktemp("shapes")
    sizes = [f"--data.init_args.counts.{split}=6" for split in ("train", "val", "test", "holdout")]
    fit_in_process(
        "--config",
        str(REPO / "configs/captioning/shapes_soft.yaml"),
        "--data.init_args.data_dir",
        str(root / "data"),
        *sizes,
        "--trainer.default_root_dir",
        str(root / "runs"),
        "--trainer.max_steps=3",
        "--model.init_args.max_caption_length=8",  # an untrained model says little, quickly
        "--trainer.logger=false",
        "--trainer.callbacks=[]",
        "--trainer.enable_checkpointing=true",
    )
    checkpoints = sorted((root / "runs").glob("**/*.ckpt"))
    assert checkpoints, "fit left no checkpoint"
    return checkpoints[-1], root / "data"


def test_caption_folder_skips_bad_files_and_writes_whole_output(
    shapes_model, tmp_path, run_command
):
    checkpoint, data = shapes_model
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("test_00000.png", "test_00001.png", "test_00002.png"):
        (folder / name).write_bytes((data / "images" / name).read_bytes())
    (folder / "broken.png").write_bytes(b"\x89PNG not really")
    (folder / "notes.txt").write_text("not an image, and not an input")
    out, maps = tmp_path / "out" / "captions.jsonl", tmp_path / "maps"
    status, _, stderr = run_command(
        "caption",
        str(folder),
        str(tmp_path / "missing.jpg"),
        "--checkpoint",
        str(checkpoint),
        "--beam",
        "2",
        "--batch-size",
        "2",
        "--out",
        str(out),
        "--attention-maps",
        str(maps),
    )
    assert status == 1, stderr[-3000:]
    assert "broken.png" in stderr and "missing.jpg" in stderr
    assert "captioned 3 images" in stderr and "2 could not be read" in stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [Path(r["image"]).name for r in records] == [
        "broken.png",
        "test_00000.png",
        "test_00001.png",
        "test_00002.png",
        "missing.jpg",
    ]
    assert "error" in records[0] and "error" in records[-1]
    assert all(isinstance(r["caption"], str) and r["score"] <= 0 for r in records[1:4])
    assert sorted(p.name for p in maps.iterdir()) == [
        "test_00000.png",
        "test_00001.png",
        "test_00002.png",
    ]
    assert [p.name for p in out.parent.iterdir()] == ["captions.jsonl"], "no temporary files left"


def test_a_baseline_that_cannot_be_scored_leaves_the_models_scores_and_captions(
    shapes_model, tmp_path, run_command
):
    """With every training image unreadable the nearest-neighbour baseline has nothing to
    compare with; that used to end the run with the captions already made thrown away."""
    import shutil

    checkpoint, data = shapes_model
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    splits = json.loads((copy / "splits.json").read_text())
    for name in splits["train"]:
        (copy / "images" / name).write_bytes(b"not an image")
    output = tmp_path / "captions.jsonl"
    status, stdout, stderr = run_command(
        *("evaluate", "captioning", "--checkpoint", str(checkpoint)),
        *("--source", str(copy), "--split", "holdout", "--beam", "1", "--no-meteor"),
        *("--nearest-neighbour", "--json", "--output", str(output)),
    )
    assert status == 1, stderr[-3000:]
    assert (
        "error: nearest-neighbour baseline: none of the training images can be read for the "
        "baseline; the model's scores follow"
    ) in stderr
    report = json.loads(stdout.strip().splitlines()[-1])
    assert report["images"] == 6 and "cider" in report and "nearest_neighbour" not in report
    assert len(output.read_text().splitlines()) == 6


def test_evaluate_captioning_json(shapes_model, tmp_path, run_command):
    """The report against its captions scored another way: BLEU-1…4 and CIDEr-D by
    pycocoevalcap (coco-caption's own code), exact match by comparing words."""
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider

    checkpoint, data = shapes_model
    output = tmp_path / "captions.jsonl"
    status, stdout, stderr = run_command(
        *("evaluate", "captioning", "--checkpoint", str(checkpoint)),
        *("--source", str(data), "--split", "holdout", "--beam", "2", "--no-meteor"),
        *("--nearest-neighbour", "--json", "--output", str(output)),
    )
    assert status == 0, stderr[-3000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    assert report["images"] == 6 and report["split"] == "holdout"
    assert report["meteor"] is None
    assert set(report["nearest_neighbour"]) >= {"bleu4", "cider"}
    assert "CIDEr-D" in stdout

    said = {r["image"]: r["caption"] for r in map(json.loads, output.read_text().splitlines())}
    with open(data / "captions.txt", newline="") as f:
        rows = list(csv.DictReader(f))
    references = {
        image: [row["caption"] for row in rows if Path(row["image"]).name == Path(image).name]
        for image in said
    }
    assert all(references.values()) and len(said) == 6
    bleu, _ = Bleu(4).compute_score(references, {i: [c] for i, c in said.items()}, verbose=0)
    cider, _ = Cider().compute_score(references, {i: [c] for i, c in said.items()})
    for n in range(4):
        assert report[f"bleu{n + 1}"] == pytest.approx(100 * bleu[n], abs=1e-6)
    assert report["cider"] == pytest.approx(100 * cider, abs=1e-6)
    exact = sum(said[i] in references[i] for i in said) / 6
    assert report["exact_match"] == pytest.approx(100 * exact)


def test_evaluate_captioning_says_how_far_it_has_got_on_stderr_and_keeps_stdout_the_report(
    shapes_model, run_command, monkeypatch
):
    """Loading, captioning (how many images, then how many are done and how fast), the
    baseline's features and scoring, in order, on stderr; stdout the same report whether
    progress lines came or not, ending with the JSON line."""

    def progress(err: str) -> list[str]:
        prefix = "evaluate captioning: "
        return [line.removeprefix(prefix) for line in err.splitlines() if line.startswith(prefix)]

    def counts(lines: list[str], total: int) -> list[int]:
        line = rf"(\d+)/{total} images \(\d+ %\)  elapsed \S+  eta \S+  [\d,.]+ images/s"
        return [int(re.fullmatch(line, said).group(1)) for said in lines]

    checkpoint, data = shapes_model
    argv = ("evaluate", "captioning", "--checkpoint", str(checkpoint), "--source", str(data),
            "--split", "holdout", "--beam", "2", "--batch-size", "2", "--no-meteor",
            "--nearest-neighbour", "--json")  # fmt: skip
    monkeypatch.setenv(VARIABLE, "0")  # a line at every batch
    status, stdout, stderr = run_command(*argv)
    assert status == 0, stderr[-3000:]
    said = progress(stderr)
    assert said[0] == f"loading {checkpoint}" and said[1].startswith("done in ")
    assert said[2] == f"decoding 6 images with {checkpoint} (beam 2)"
    assert counts(said[3:6], 6) == [2, 4, 6] and said[6].startswith("done, 6 images in ")
    assert said[7] == "nearest-neighbour baseline: features of 12 images"
    assert counts(said[8:14], 12) == [2, 4, 6, 8, 10, 12]
    assert said[14].startswith("done, 12 images in ")
    assert said[15:17] == ["scoring 6 captions", said[16]] and said[16].startswith("done in ")
    assert len(said) == 17

    monkeypatch.setenv(VARIABLE, "600")  # no line between a stage's start and its end
    status, quiet, stderr = run_command(*argv)
    assert status == 0 and len(progress(stderr)) == 8 and quiet == stdout
    assert not progress(stdout) and json.loads(stdout.splitlines()[-1])["images"] == 6


def test_evaluate_captioning_scores_what_caption_wrote_as_it_scores_the_model(
    shapes_model, tmp_path, run_command
):
    """`seqtasks caption` on a copy of the holdout images (and one image of another split),
    then `evaluate captioning --pred` on its file: the scores of `--checkpoint` at the same
    beam, the copy matched by file name, the other image passed over; the attention hit rate,
    which needs the model's attention, left out."""
    import shutil

    from seqtasks.captioning.captions import read_captions

    checkpoint, data = shapes_model
    splits = read_captions(data)
    copies = tmp_path / "copies"
    copies.mkdir()
    for image in [*splits["holdout"], splits["train"][0]]:
        shutil.copy(image.path, copies / image.name)
    captions = tmp_path / "captions.jsonl"
    status, _, stderr = run_command(
        *("caption", str(copies), "--checkpoint", str(checkpoint), "--beam", "2"),
        *("--out", str(captions)),
    )
    assert status == 0, stderr[-3000:]
    assert len(captions.read_text().splitlines()) == 7
    scored = ("--source", str(data), "--split", "holdout", "--no-meteor", "--json")
    status, stdout, stderr = run_command("evaluate", "captioning", "--pred", str(captions), *scored)
    assert status == 0, stderr[-3000:]
    assert f"== {captions} on {data}, holdout split\n" in stdout
    from_file = json.loads(stdout.strip().splitlines()[-1])
    status, stdout, stderr = run_command(
        *("evaluate", "captioning", "--checkpoint", str(checkpoint), "--beam", "2", *scored)
    )
    assert status == 0, stderr[-3000:]
    from_model = json.loads(stdout.strip().splitlines()[-1])
    assert from_file["pred_file"] == str(captions) and "beam" not in from_file
    assert from_file["images"] == 6
    for name in ("bleu1", "bleu4", "cider", "exact_match", "truthful"):
        assert from_file[name] == pytest.approx(from_model[name], abs=1e-9), name
    assert "attention_hits" not in from_file


def test_a_file_of_captions_that_will_not_do_is_named_with_its_line(
    shapes_model, tmp_path, run_command
):
    """Each record an image of the holdout split, by path: with one record made unreadable the
    rest are scored and the status is 1 (as for a model); a missing image, a second record of
    one image and a line that is not a record are refused naming the file (and line)."""
    from seqtasks.captioning.captions import read_captions

    _, data = shapes_model
    images = read_captions(data)["holdout"]
    records = [{"image": str(i.path), "caption": i.captions[0]} for i in images]
    pred = tmp_path / "captions.jsonl"
    scored = ("--source", str(data), "--split", "holdout", "--no-meteor", "--json")

    def evaluate(lines: list) -> tuple[int, str, str]:
        pred.write_text("".join(line if isinstance(line, str) else json.dumps(line) + "\n"
                                for line in lines))  # fmt: skip
        return run_command("evaluate", "captioning", "--pred", str(pred), *scored)

    status, stdout, _ = evaluate(records)
    assert status == 0 and json.loads(stdout.splitlines()[-1])["exact_match"] == 100.0
    status, stdout, stderr = evaluate([*records[:5], {"image": records[5]["image"], "error": "x"}])
    assert status == 1 and "error: x" in stderr
    report = json.loads(stdout.splitlines()[-1])
    assert report["images"] == 5 and report["images_unreadable"] == [records[5]["image"]]
    assert "WARNING: scores over 5 of the 6 images" in stdout
    status, _, stderr = evaluate(records[:5])
    assert status == 2 and stderr == (
        f"error: {pred} has no caption for 1 of the 6 images of the holdout split (the first: "
        f"{images[5].path}): caption every image of the split (seqtasks caption FOLDER "
        "--checkpoint CKPT --out FILE)\n"
    )
    status, _, stderr = evaluate([*records, records[2]])
    assert status == 2 and stderr == (
        f"error: {pred}:7: a second record of {images[2].path} (the first is on line 3)\n"
    )
    for bad in ("A red square.\n", {"image": records[0]["image"]}, ["a", "list"]):
        status, _, stderr = evaluate([*records[:3], bad, *records[3:]])
        assert status == 2 and stderr.startswith(f"error: {pred}:4: not a"), stderr


def test_evaluate_captioning_scores_each_caption_against_its_own_image(
    shapes_model, monkeypatch, capsys
):
    """With a model that says its image's first reference for images 0, 2, 4 of the split and
    "a red" for the others (in split order, as the app captions them), exact match is 50 % and
    CIDEr-D is pycocoevalcap's on those pairs: each caption is read against its own image's
    references, however the batches fall."""
    from pycocoevalcap.cider.cider import Cider

    from seqtasks.captioning.captioner import Caption, Captioner
    from seqtasks.captioning.captions import read_captions

    checkpoint, data = shapes_model
    images = read_captions(data)["holdout"]
    texts = [image.captions[0] if i % 2 == 0 else "a red" for i, image in enumerate(images)]
    said = iter(texts)

    def oracle(self, pixels, settings, attention=False):
        texts = [next(said) for _ in range(len(pixels))]
        return [Caption(text, text.split(), 0.0, None, (6, 6)) for text in texts]

    monkeypatch.setattr(Captioner, "caption_batch", oracle)
    status = evaluate.main(
        ["captioning", "--checkpoint", str(checkpoint), "--source", str(data)]
        + ["--split", "holdout", "--batch-size", "4", "--no-meteor", "--json", "--device", "cpu"]
    )
    assert status == 0
    out = capsys.readouterr().out
    report = json.loads(out.strip().splitlines()[-1])
    assert report["images"] == 6 and report["exact_match"] == pytest.approx(50.0)
    assert len({texts[0], texts[2], texts[4]}) == 3  # three captions, then "a red" three times
    assert report["distinct_captions"] == pytest.approx(100 * 4 / 6)
    assert "distinct captions = 4 of 6 (66.67 %)" in out.splitlines()
    references = {i: image.captions for i, image in enumerate(images)}
    cider, _ = Cider().compute_score(references, {i: [t] for i, t in enumerate(texts)})
    assert report["cider"] == pytest.approx(100 * cider, abs=1e-6) and cider > 0


def test_bench_shapes_attention_reports_hits_by_word(shapes_model, monkeypatch, capsys):
    """With a model that names each test image's first shape ("a [size] colour shape") and
    puts the peak of its attention on a cell whose centre lies in that shape's box behind every
    word but the colour, which looks at a cell in no shape's box, the bench must report 100 %,
    0 % and 100 % (the untrained model mentions no shape, so it could not tell a broken count)."""
    from seqtasks.captioning.captioner import Caption, Captioner
    from seqtasks.captioning.shapes import Scene

    checkpoint, data = shapes_model
    scenes = json.loads((data / "scenes.json").read_text())
    names = json.loads((data / "splits.json").read_text())["test"]
    height, width = 6, 6

    def cells_in(scene: Scene, box: tuple[float, float, float, float] | None) -> list[int]:
        """Grid cells whose centre lies in `box` (None: in no shape's box)."""
        size = scene.image_size
        centres = {
            r * width + c: ((c + 0.5) * size / width, (r + 0.5) * size / height)
            for r in range(height)
            for c in range(width)
        }
        inside = lambda b, x, y: b[0] <= x <= b[2] and b[1] <= y <= b[3]  # noqa: E731
        if box is not None:
            return [cell for cell, (x, y) in centres.items() if inside(box, x, y)]
        boxes = [thing.box for thing in scene.things]
        return [cell for cell, (x, y) in centres.items() if not any(inside(b, x, y) for b in boxes)]

    captions = []
    for name in names:
        scene = Scene.from_dict(scenes[name])
        first = scene.things[0]
        same = [t for t in scene.things if t.noun_phrase(True) == first.noun_phrase(True)]
        on, off = cells_in(scene, first.box), cells_in(scene, None)
        if len(same) > 1 or not on or not off:  # ambiguous or undrawable: say nothing of it
            captions.append(Caption("", [], 0.0, torch.zeros(0, height * width), (height, width)))
            continue
        words = first.noun_phrase(scene.sizes).split()  # a [size] colour shape
        peaks = [on[0]] * len(words)
        peaks[-2] = off[0]  # the colour word looks at the background
        attention = torch.nn.functional.one_hot(torch.tensor(peaks), height * width).float()
        captions.append(Caption(" ".join(words), words, 0.0, attention, (height, width)))
    said = iter(captions)
    assert sum(bool(c.words) for c in captions) >= 3, "too few usable test images"

    def oracle(self, pixels, settings, attention=False):
        return [next(said) for _ in range(len(pixels))]

    monkeypatch.setattr(Captioner, "caption_batch", oracle)
    bench = load_script("bench/shapes_attention.py")
    rates = bench.main(
        ["--checkpoint", str(checkpoint), "--source", str(data), "--split", "test", "--json"]
    )
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["images"] == len(names)
    expected = {"shape word": 100.0, "colour word (-1)": 0.0, "article (-2)": 100.0}
    assert rates == expected and {k: report[k] for k in expected} == expected


def test_other_checkpoints_are_refused_by_name(shapes_model, tmp_path, run_command):
    checkpoint = torch.load(shapes_model[0], map_location="cpu", weights_only=False)
    relabel(checkpoint, "translation")
    path = tmp_path / "other.ckpt"
    torch.save(checkpoint, path)
    status, _, stderr = run_command("caption", str(tmp_path), "--checkpoint", str(path))
    assert status == 2
    assert "is a translation checkpoint, not a captioning one" in stderr


def test_a_model_without_attention_is_scored_on_the_shapes_world_without_hits(
    shapes_model, tmp_path, run_command
):
    """Show-and-Tell has no attention: its report on the shapes world has exact match and
    truthfulness but no attention hit rate (it used to end in a traceback)."""
    _, data = shapes_model
    root = tmp_path / "runs"
    sizes = [f"--data.init_args.counts.{split}=6" for split in ("train", "val", "test", "holdout")]
    fit_in_process(
        "--config",
        str(REPO / "configs/captioning/shapes_no_attention.yaml"),
        "--data.init_args.data_dir",
        str(data),
        *sizes,
        "--trainer.default_root_dir",
        str(root),
        "--trainer.max_steps=2",
        "--model.init_args.max_caption_length=8",
        "--trainer.logger=false",
        "--trainer.callbacks=[]",
        "--trainer.enable_checkpointing=true",
    )
    (checkpoint,) = root.glob("**/*.ckpt")
    status, stdout, stderr = run_command(
        *("evaluate", "captioning", "--checkpoint", str(checkpoint), "--source", str(data)),
        *("--split", "test", "--no-meteor", "--json"),
    )
    assert status == 0, stderr[-3000:]
    report = json.loads(stdout.strip().splitlines()[-1])
    assert report["images"] == 6 and "exact_match" in report and "truthful" in report
    assert "attention_hits" not in report
