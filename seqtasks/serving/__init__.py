"""`seqtasks serve`: trained checkpoints behind HTTP endpoints, on LitServe, with dynamic
batching (requests that arrive together share one model call).

    seqtasks serve translation.ckpt parser.ckpt --port 8000
    curl localhost:8000/translate -H 'Content-Type: application/json' \
        -d '{"sentences": ["Ein Hund rennt."]}'

Modules: `requests` (the JSON bodies, validated by FastAPI), `validation` (the answers to bodies
FastAPI refuses), `forms` (a multipart body read without its headers; what an upload holds is
its endpoint's, as /caption's is `seqtasks.captioning.uploads`), `batching` (one model call per
search setting; bad requests answered alone), `endpoint` (what every task's endpoint shares;
each task's own is its `endpoint.py`), `workers` (serving only once every worker is ready),
`startup` (what loads, and the ready line), `served` (the models held, by task, and their
names), `plain` (plain-text answers end with a newline), `server` (the LitServer for a set of
checkpoints). Its command line is `seqtasks.cli.serve`.
docs/serving.md has the endpoints, the errors and the measured throughput.
"""
