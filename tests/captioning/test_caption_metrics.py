"""Caption metrics: PTB tokenisation, BLEU and CIDEr-D as coco-caption computes them, checked
by hand and against pycocoevalcap itself when it is installed."""

from __future__ import annotations

import csv
import math
import random
import shutil

import pytest
from conftest import flickr8k_subset

from seqtasks.captioning.metrics import bleu, cider_d, ptb_tokenize, score_captions


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("A dog runs .", "a dog runs"),
        ("A man's dog can't swim, doesn't it?", "a man 's dog ca n't swim does n't it"),
        (
            'Two kids (boys) play "tag" in the U.S. at 3 p.m. ...',
            "two kids -lrb- boys -rrb- play tag in the u.s. at 3 p.m.",
        ),
        (
            "a black-and-white dog/cat & a t-shirt -- wow!",
            "a black-and-white dog/cat & a t-shirt wow",
        ),
        ("gonna wanna cannot", "gon na wan na can not"),
        (
            "He paid $5 for 10,000 shirts: 50%; at 5:30",
            "he paid $ 5 for 10,000 shirts 50 % at 5:30",
        ),
        ("The dog's ball.It is red", "the dog 's ball.it is red"),
    ],
)
def test_ptb_tokenize(text, tokens):
    assert ptb_tokenize(text) == tokens.split()


def test_bleu_by_hand():
    hyp, ref = "the cat sat on the mat".split(), "the cat sat on a mat".split()
    # 1-grams 5/6, 2-grams 3/5, 3-grams 2/4, 4-grams 1/3; equal lengths, no brevity penalty.
    expected = [5 / 6, (5 / 6 * 3 / 5) ** 0.5, (5 / 6 * 3 / 5 * 2 / 4) ** (1 / 3)]
    expected.append((5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** 0.25)
    assert bleu([hyp], [[ref]]) == pytest.approx(expected, rel=1e-9)
    # Clipping: "the" counts at most as often as in one reference; the closest reference length
    # (the shorter on a tie) sets the brevity penalty.
    short = bleu([["the", "the", "the"]], [[["the", "cat"], ["a", "the", "dog", "x"]]])
    assert short[0] == pytest.approx(1 / 3, rel=1e-6)
    brief = bleu([["the", "cat"]], [[["the", "cat", "sat"], ["the", "cat", "sat", "down"]]])
    assert brief[0] == pytest.approx(math.exp(1 - 3 / 2), rel=1e-6)


def test_cider_d_by_hand():
    corpus = ["a dog runs on grass".split(), "two cats sleep inside".split(), "red bus".split()]
    # Each hypothesis is its image's only reference and shares no n-gram with the others: every
    # n-gram has idf log(3) - log(1), every cosine is 1, the length penalty 1, so 10 per image,
    # except that the mean over n = 1…4 counts the orders a short caption lacks as 0: "red bus"
    # has no 3- or 4-grams and scores 5.
    assert cider_d(corpus, [[c] for c in corpus]) == pytest.approx((10 + 10 + 5) / 3)
    # No overlap at all scores 0; repeating a matching word does not help (clipping).
    assert cider_d([["bus"], ["grass"], ["sleep"]], [[c] for c in corpus]) == 0.0
    once = cider_d([["a", "dog"], ["x"], ["y"]], [[c] for c in corpus])
    twice = cider_d([["a", "dog", "a", "dog"], ["x"], ["y"]], [[c] for c in corpus])
    assert 0 < twice < once


def test_scores_are_percentages_and_inputs_must_align():
    scores = score_captions(["A dog runs."], [["a dog runs", "the dog runs fast"]])
    assert scores.bleu1 == pytest.approx(100.0) and scores.images == 1 and scores.meteor is None
    with pytest.raises(ValueError, match="1 hypotheses for 2 reference sets"):
        score_captions(["a dog"], [["a dog"], ["a cat"]])


def flickr_sample(images: int = 300, seed: int = 0) -> tuple[list[str], list[list[str]]]:
    """Hypotheses (the first 40 images their own first caption, the rest another image's
    caption) and the four other references of each image, from the shared Flickr8k subset."""
    with open(flickr8k_subset() / "captions.txt", newline="") as f:
        rows = list(csv.reader(f))[1:]
    by_image: dict[str, list[str]] = {}
    for image, caption in rows:
        by_image.setdefault(image, []).append(caption)
    names = sorted(by_image)[:images]
    rng = random.Random(seed)
    hypotheses = [by_image[rng.choice(names)][rng.randrange(5)] for _ in names]
    hypotheses[:40] = [by_image[name][0] for name in names[:40]]
    return hypotheses, [by_image[name][1:] for name in names]


def test_bleu_and_cider_d_equal_pycocoevalcap():
    pytest.importorskip("pycocoevalcap")
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider

    hypotheses, references = flickr_sample()
    hyps = [ptb_tokenize(h) for h in hypotheses]
    refs = [[ptb_tokenize(r) for r in rs] for rs in references]
    gts = {i: [" ".join(r) for r in rs] for i, rs in enumerate(refs)}
    res = {i: [" ".join(h)] for i, h in enumerate(hyps)}
    expected_bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    expected_cider, _ = Cider().compute_score(gts, res)
    assert bleu(hyps, refs) == pytest.approx(expected_bleu, rel=1e-9)
    assert cider_d(hyps, refs) == pytest.approx(expected_cider, rel=1e-9)


@pytest.mark.slow
def test_ptb_tokenize_equals_the_stanford_tokenizer_on_flickr8k():
    """coco-caption's PTBTokenizer runs Stanford CoreNLP in Java; ours must agree with it."""
    pytest.importorskip("pycocoevalcap")
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    hypotheses, references = flickr_sample(images=900)
    captions = hypotheses + [r for rs in references for r in rs]
    expected = PTBTokenizer().tokenize({i: [{"caption": c}] for i, c in enumerate(captions)})
    mismatches = [
        (c, expected[i][0])
        for i, c in enumerate(captions)
        if " ".join(ptb_tokenize(c)) != expected[i][0]
    ]
    assert not mismatches, mismatches[:5]
