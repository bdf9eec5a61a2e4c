"""Dynamic batching with answers of their own for bad requests.

LitServe gathers the requests that wait for a worker (up to `max_batch_size`, for at most
`batch_timeout` seconds) and hands them to `predict` as one batch. Here one model call then
serves every request of the batch that shares its search settings (and whether it asks for
attention weights): their inputs are joined, the model batches them by length as it does
offline, and each request gets its own slice of the results back, in its own order. Requests
with different beams (or n-best sizes) are served by one call per setting.

A request must not fail the others: LitServe's batched loop answers a whole batch with the
error when `decode_request`, `predict` or `encode_response` raises, so here none of them raises
for one request. `decode_request` turns a refused request into a `RequestError` value that
rides through the batch untouched, and `encode_response` answers it alone with its status and
message; a check that fails in a way no check foresaw is that request's 422 all the same (its
exception named, its traceback in the server's log), since a check reads that request alone. A
model call that fails for a group is retried one request at a time, so that only the request
that makes the model fail gets a 500. `encode_response` writes the JSON itself, a score JSON
cannot carry (NaN, ±inf) as null, so that no answer fails later in the HTTP process.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import litserve as ls
from fastapi.responses import JSONResponse

from seqtasks.search.settings import SearchSettings

log = logging.getLogger(__name__)


class RequestError(Exception):
    """A request answered with an error instead of a result: its HTTP status and message."""

    def __init__(self, status: int, detail: str):
        super().__init__(status, detail)
        self.status = status
        self.detail = detail


@dataclass
class Job:
    """A checked request: its inputs (sentences, or one image's pixels), the search settings
    its results are searched with (whole, as the model's search takes them), and whether they
    keep their attention weights."""

    inputs: list[Any]
    settings: SearchSettings
    attention: bool = False

    @property
    def group(self) -> tuple[SearchSettings, bool]:
        """What the jobs served by one model call share."""
        return self.settings, self.attention


class BatchedEndpoint(ls.LitAPI):
    """A LitServe API that checks each request on its own and serves a batch of them with one
    model call per search setting. A subclass says how to `check` a request into a `Job`, how
    to `run` the model on many inputs, and how to `respond` with one request's results; it
    overrides `decode_request` only to annotate the request type FastAPI validates.
    """

    def decode_request(self, request: Any) -> Job | RequestError:
        try:
            return self.check(request)
        except RequestError as error:
            return error
        except Exception as error:  # it depends on the request alone: that request's 4xx
            log.exception("checking a request failed")
            reason = " ".join(str(error).split())[:200] or "no details"
            return RequestError(422, f"cannot read this request ({type(error).__name__}: {reason})")

    def batch(self, items: Sequence[Job | RequestError]) -> list[Job | RequestError]:
        return list(items)

    def predict(self, items: Any) -> Any:
        """One result list (or RequestError) per item, in order: one model call (`run`) on the
        inputs of every job of one setting, each job given its own slice of the results. A
        call that fails for a group is made again for each of its jobs alone, so that only
        the request that makes the model fail gets a 500. Unbatched (max_batch_size 1),
        LitServe passes one item and expects its result alone."""
        batched = self.max_batch_size > 1
        items = list(items) if batched else [items]
        outputs: list[Any] = list(items)  # a RequestError stays in its place
        groups: dict[tuple[SearchSettings, bool], list[int]] = {}
        for position, item in enumerate(items):
            if isinstance(item, Job):
                groups.setdefault(item.group, []).append(position)
        todo = list(groups.values())
        while todo:
            positions = todo.pop(0)
            jobs = [items[p] for p in positions]
            inputs = [x for job in jobs for x in job.inputs]
            try:
                results = list(self.run(inputs, jobs[0].settings, jobs[0].attention))
                if len(results) != len(inputs):
                    raise RuntimeError(f"{len(results)} results for {len(inputs)} inputs")
            except Exception:
                if len(jobs) > 1:
                    log.exception("a batch of %d requests failed; serving each alone", len(jobs))
                    todo += [[p] for p in positions]
                    continue
                log.exception("the model failed on a request")
                outputs[positions[0]] = RequestError(
                    500, "the model failed on this request (see the server log)"
                )
                continue
            start = 0
            for position, job in zip(positions, jobs, strict=True):
                outputs[position] = results[start : start + len(job.inputs)]
                start += len(job.inputs)
        return outputs if batched else outputs[0]

    def unbatch(self, outputs: list[Any]) -> list[Any]:
        return list(outputs)

    def encode_response(self, output: Any) -> Any:
        try:
            if isinstance(output, RequestError):
                return JSONResponse({"detail": output.detail}, status_code=output.status)
            return JSONResponse(finite(self.respond(output)))
        except Exception:
            log.exception("writing an answer failed")
            return JSONResponse(
                {"detail": "the server failed to write the answer to this request (see its log)"},
                status_code=500,
            )

    # ---- what a task's endpoint says --------------------------------------------------------
    def check(self, request: Any) -> Job:
        """The request as a Job, or raise RequestError saying what is wrong with it."""
        raise NotImplementedError

    def run(self, inputs: list[Any], settings: SearchSettings, attention: bool) -> list[Any]:
        """One result per input, in order, from one call of the model searching with
        `settings` (`attention`: with the attention weights behind each result)."""
        raise NotImplementedError

    def respond(self, results: list[Any]) -> dict[str, Any]:
        """The JSON answer to one request, from its results."""
        raise NotImplementedError


def finite(answer: Any) -> Any:
    """`answer` (dicts, lists, scalars) with each float that JSON cannot carry as None."""
    if isinstance(answer, dict):
        return {key: finite(value) for key, value in answer.items()}
    if isinstance(answer, list):
        return [finite(value) for value in answer]
    if isinstance(answer, float) and not math.isfinite(answer):
        return None
    return answer
