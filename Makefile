# Developer shortcuts; they expect the virtual environment of the README in .venv.
PY ?= .venv/bin/python

.PHONY: test test-fast lint bench data

test:            ## the whole suite, as CI runs it
	$(PY) -m pytest -n auto

test-fast:       ## unit tests only (skips the CLI / training integration tests)
	$(PY) -m pytest -n auto -m "not slow"

lint:
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

data:            ## Multi30k from the shared copy (use --source URL elsewhere)
	$(PY) data_prep/multi30k.py --source ../shared/data/multi30k --out data/multi30k

bench: data      ## training and beam-search throughput vs a tutorial-style reference (bench/README.md)
	$(PY) bench/translation_train.py --config configs/translation/transformer.yaml
	$(PY) bench/translation_decode.py --config configs/translation/transformer.yaml
	$(PY) bench/translation_train.py --config configs/translation/rnn_bahdanau.yaml
	$(PY) bench/translation_decode.py --config configs/translation/rnn_bahdanau.yaml
