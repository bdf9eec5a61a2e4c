"""Word alignments (`seqtasks/translation/alignment.py`): Pharaoh lines read and written,
subword attention summed into words, and alignment error rate, precision and recall with sure
and possible links (Och & Ney 2003), each against an example worked by hand."""

from __future__ import annotations

import pytest
import torch

from seqtasks.translation.alignment import (
    alignment_attention,
    attention_links,
    piece_positions,
    piece_words,
    read_links,
    score_alignments,
    word_attention,
    write_links,
)
from seqtasks.translation.dates import generate, gold_alignment


def test_sure_and_possible_links_are_read_and_every_sure_link_is_possible():
    gold = read_links("0-0 1-1 1?2 2p3", "gold.txt:1")
    assert gold.sure == {(0, 0), (1, 1)}
    assert gold.possible == {(0, 0), (1, 1), (1, 2), (2, 3)}
    assert read_links("", "gold.txt:2").sure == frozenset()


@pytest.mark.parametrize("item", ["x", "1-", "1-2-3", "-1-2", "1:2"])
def test_an_item_that_is_not_a_link_is_refused_naming_its_line(item):
    with pytest.raises(ValueError, match=rf"^gold.txt:3: {item!r} is not a link"):
        read_links(f"0-0 {item}", "gold.txt:3")


def test_links_are_written_by_source_then_target_word_once_each():
    assert write_links([(2, 0), (0, 1), (0, 0), (2, 0)]) == "0-0 0-1 2-0"
    assert write_links([]) == ""


def test_aer_precision_and_recall_of_a_corpus_as_worked_by_hand():
    """Sentence 1: A = {0-0, 1-2, 3-3}, S = {0-0, 1-1}, P = S ∪ {1-2, 2-3}: |A ∩ S| = 1,
    |A ∩ P| = 2. Sentence 2: A = {}, S = P = {0-1}. Summed: |A| = 3, |S| = 3, |A ∩ S| = 1,
    |A ∩ P| = 2: precision 2/3, recall 1/3, AER 1 − (1 + 2)/(3 + 3) = 1/2 (× 100)."""
    gold = [read_links("0-0 1-1 1?2 2p3", "g:1"), read_links("0-1", "g:2")]
    predicted = [read_links("0-0 1-2 3-3", "a:1").sure, set()]
    scores = score_alignments(predicted, gold)
    assert scores.precision == pytest.approx(200 / 3)
    assert scores.recall == pytest.approx(100 / 3)
    assert scores.aer == pytest.approx(50.0)
    assert (scores.predicted, scores.sure, scores.possible, scores.sentences) == (3, 3, 5, 2)
    first = score_alignments(predicted[:1], gold[:1])  # 1 − 3/5
    assert (first.precision, first.recall, first.aer) == pytest.approx((200 / 3, 50.0, 40.0))
    perfect = score_alignments([gold[0].sure], gold[:1])
    assert (perfect.precision, perfect.recall, perfect.aer) == (100.0, 100.0, 0.0)


def test_scoring_refuses_files_of_two_lengths_and_gold_without_sure_links():
    with pytest.raises(ValueError, match="2 predicted alignments for 1 gold ones"):
        score_alignments([set(), set()], [read_links("0-0", "g:1")])
    with pytest.raises(ValueError, match="no sure link"):
        score_alignments([set()], [read_links("0?0", "g:1")])


def test_pieces_belong_to_the_word_their_mark_starts():
    assert piece_words(["▁das", "▁Haus", "chen", "▁", "."]) == [0, 1, 1, 2, 2]
    assert piece_words(["Haus", "chen", "▁ist"]) == [0, 0, 1]
    assert piece_words([]) == []


SOURCE = ["▁das", "▁Haus", "chen"]  # 2 words, then the EOS
TARGET = ["▁the", "▁little", "▁hou", "se", "▁."]  # 4 words
ATTENTION = torch.tensor(
    [  # over ▁das, ▁Haus, chen, EOS
        [0.70, 0.10, 0.10, 0.10],  # ▁the
        [0.30, 0.25, 0.25, 0.20],  # ▁little: Häuschen by its two pieces, das by its first
        [0.45, 0.30, 0.05, 0.20],  # ▁hou   } house: das by its first piece,
        [0.00, 0.30, 0.50, 0.20],  # se     } Häuschen by both
        [0.10, 0.10, 0.10, 0.70],  # ▁.: the EOS
    ]
)


def test_a_words_pieces_are_summed_on_both_sides():
    expected = torch.tensor(
        [
            [0.70, 0.20, 0.10],
            [0.30, 0.50, 0.20],
            [0.45, 1.15, 0.40],
            [0.10, 0.20, 0.70],
        ]
    )
    torch.testing.assert_close(word_attention(ATTENTION, SOURCE, TARGET), expected)
    with pytest.raises(ValueError, match=r"attention \(5, 4\) is not over 5 target pieces and 4"):
        word_attention(ATTENTION, [*SOURCE, "▁x"], TARGET)


def test_each_target_word_links_to_the_source_word_it_attends_to_most_but_the_eos():
    """the → das, little → Häuschen (0.25 + 0.25 against das's 0.30: summed, not first
    pieces), house → Häuschen (summed over its two pieces), . → the EOS: unaligned."""
    assert attention_links(ATTENTION, SOURCE, TARGET) == {(0, 0), (1, 1), (1, 2)}


def test_a_character_models_positions_are_its_characters():
    """With target_units "pieces" every piece is a position but a bare ▁ (no character): the
    dates task's ISO date `▁ 1 9 -` is 3 characters, and ▁'s attention counts for none."""
    target = ["▁", "1", "9", "-"]
    assert piece_positions(target) == [None, 0, 1, 2]
    attention = torch.tensor(
        [  # over ▁das, ▁Haus, chen, EOS
            [0.0, 0.0, 0.0, 1.0],  # ▁: would link to the EOS if it counted
            [0.6, 0.2, 0.1, 0.1],
            [0.1, 0.3, 0.4, 0.2],
            [0.1, 0.1, 0.1, 0.7],
        ]
    )
    words = word_attention(attention, SOURCE, target, "pieces")
    torch.testing.assert_close(
        words, attention[1:] @ torch.tensor([[1.0, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1]])
    )
    assert attention_links(attention, SOURCE, target, "pieces") == {(0, 0), (1, 1)}


def test_the_dates_gold_links_each_field_to_the_word_that_spells_it():
    """Worked by hand: "the fifth of may 2001" -> 2001-05-05: the year's digits (0–3) to word
    4, the month's (5, 6) to word 3, the day's (8, 9) to "fifth" (1), possibly to "the" and
    "of"; the hyphens (4, 7) possibly to every word. Over generated dates, every digit has one
    sure word and no hyphen has any."""
    gold = read_links(gold_alignment("the fifth of may 2001", "2001-05-05"), "dates")
    assert gold.sure == {(4, 0), (4, 1), (4, 2), (4, 3), (3, 5), (3, 6), (1, 8), (1, 9)}
    hyphens = {(i, j) for i in range(5) for j in (4, 7)}
    assert gold.possible - gold.sure == {(0, 8), (0, 9), (2, 8), (2, 9)} | hyphens
    dotted = read_links(gold_alignment("5.5.2001", "2001-05-05"), "dates")
    assert dotted.sure == {(0, j) for j in (0, 1, 2, 3, 5, 6, 8, 9)}
    for spelled, iso in generate(500, seed=3):
        sure = read_links(gold_alignment(spelled, iso), spelled).sure
        assert sorted(j for _, j in sure) == [0, 1, 2, 3, 5, 6, 8, 9], spelled


def test_alignments_read_garg_et_als_penultimate_layer_unless_told():
    """Layer and heads chosen from maps (heads, queries, keys) that tell apart which was read:
    layer l, head h holds the constant 10·l + h."""
    layers = [torch.stack([torch.full((2, 3), 10.0 * l + h) for h in range(4)]) for l in range(3)]
    assert alignment_attention(layers).unique().tolist() == [11.5]  # layer 1 of 3, mean of 4
    assert alignment_attention(layers[:1]).unique().tolist() == [1.5]  # the one layer there is
    assert alignment_attention(layers, layer=-1, heads=[0, 2]).unique().tolist() == [21.0]
    assert alignment_attention(layers, layer=0, heads=[3]).unique().tolist() == [3.0]
    with pytest.raises(IndexError, match=r"^layer 3: the decoder's cross-attention has 3 layers"):
        alignment_attention(layers, layer=3)
    with pytest.raises(IndexError, match=r"^heads \[1, 4\]: .* has 4 heads \(0 to 3\)$"):
        alignment_attention(layers, heads=[1, 4])
