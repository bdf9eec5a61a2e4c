"""`SearchSettings`: checked once, with messages naming the setting as its caller spells it, and
overridden only where a value is given."""

from __future__ import annotations

from functools import partial

import pytest
from test_bad_input import LUONG, RNN

from seqtasks.decoders import LuongDecoder
from seqtasks.encoders import RNNEncoder
from seqtasks.search import SearchSettings
from seqtasks.translation.task import TranslationTask

TASK = SearchSettings(5, 1.0, "exact", 1.5, 10)


def test_override_keeps_what_is_none_and_checks_what_it_changes():
    assert TASK.override() == TASK
    assert TASK.override(beam=None, n_best=None, stop=None, max_length=None) == TASK
    wider = TASK.override(beam=8, n_best=3, stop="heuristic", max_length=40)
    assert (wider.beam, wider.n_best, wider.stop, wider.max_length) == (8, 3, "heuristic", 40)
    assert (wider.length_alpha, wider.max_length_ratio, wider.max_length_offset) == (1.0, 1.5, 10)
    assert TASK.override(beam=1).greedy and not TASK.greedy
    with pytest.raises(TypeError):
        TASK.override(beams=3)  # a misspelt setting is no setting


@pytest.mark.parametrize(
    "given, message",
    [
        ({"beam": 0}, "beam must be a positive integer, got 0"),
        ({"beam": True}, "beam must be a positive integer, got True"),
        ({"n_best": 2.5}, "n_best must be a positive integer, got 2.5"),
        ({"max_length": -1}, "max_length must be a positive integer, got -1"),
        ({"n_best": 6}, "n_best=6 cannot exceed beam=5"),
        ({"beam": 2, "n_best": 3}, "n_best=3 cannot exceed beam=2"),
        ({"stop": "early"}, "stop must be one of exact, heuristic, got 'early'"),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_them(given, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        TASK.override(**given)


@pytest.mark.parametrize(
    "config, message",
    [
        ({"test_beam": 0}, "test_beam must be a positive integer, got 0"),
        ({"val_beam": -2}, "val_beam must be a positive integer, got -2"),
        ({"beam_stop": "fast"}, "beam_stop must be one of exact, heuristic, got 'fast'"),
    ],
)
def test_a_task_refuses_its_config_naming_the_yaml_key(config, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        TranslationTask(RNN, LUONG, 10, 10, **config)


def test_a_task_builds_its_validation_and_test_settings_from_its_config():
    parts = (
        partial(RNNEncoder, embed_dim=8, hidden_size=8),
        partial(LuongDecoder, embed_dim=8, hidden_size=16),
    )
    task = TranslationTask(*parts, 10, 10, val_beam=2, test_beam=4, length_alpha=0.6)
    assert task.val_settings == SearchSettings(2, 0.6, "exact", 1.5, 10)
    assert task.test_settings == SearchSettings(4, 0.6, "exact", 1.5, 10)
