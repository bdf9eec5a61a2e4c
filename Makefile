# Developer shortcuts; they expect the virtual environment of the README in .venv.
PY ?= .venv/bin/python

.PHONY: test test-fast lint bench data

test:            ## the whole suite, as CI runs it
	$(PY) -m pytest -n auto

test-fast:       ## unit tests only (skips the CLI / training integration tests)
	$(PY) -m pytest -n auto -m "not slow"

lint:            ## ruff (the dev extra's pinned version), as .ci/run runs it
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

# What data_prep/multi30k.py writes: `make data` runs it only while one of them is missing.
MULTI30K := $(foreach split,train val test_2016_flickr,$(addprefix data/multi30k/$(split).,de en)) \
	data/multi30k/spm.de.model data/multi30k/spm.en.model

data:            ## Multi30k from the shared copy, unless it is there (use --source URL elsewhere)
ifeq ($(filter-out $(wildcard $(MULTI30K)),$(MULTI30K)),)
	@echo "data/multi30k is prepared already (rm -r data/multi30k to prepare it again)"
else
	$(PY) data_prep/multi30k.py --source ../shared/data/multi30k --out data/multi30k
endif

# 28 min 19 s on machine A (2 cores) while other jobs shared it; bench/README.md has each part.
bench: data      ## training and beam-search throughput vs a tutorial-style reference (bench/README.md)
	$(PY) bench/translation_train.py --config configs/translation/transformer.yaml
	$(PY) bench/translation_decode.py --config configs/translation/transformer.yaml
	$(PY) bench/translation_train.py --config configs/translation/rnn_bahdanau.yaml
	$(PY) bench/translation_decode.py --config configs/translation/rnn_bahdanau.yaml
