"""`kirolearn doctor`'s model checks: is the configured model server reachable, does it answer
a short probe, and does JSON output work, in which structured-output form.

Only a model with an `[extract] api_base` (a local or self-hosted server) is probed: a hosted
provider is reached over the internet with a paid key, and `doctor` must not spend or send
anything there unasked.
"""

import time
import urllib.error
import urllib.request

from pydantic import BaseModel, ValidationError

from kirolearn.pipeline import extract, structured

# a small local model on a busy machine answers a short probe in 1-30 s
PROBE_SECONDS = 60.0
REACH_SECONDS = 5.0


class Probe(BaseModel):
    ok: bool


PROBE_MESSAGES = [
    {"role": "system", "content": "You answer with JSON only."},
    {"role": "user", "content": 'Reply with the JSON object {"ok": true} and nothing else.'},
]


def reachable(api_base: str, seconds: float = REACH_SECONDS) -> str:
    """'' when the server at `api_base` answers HTTP at all (any status), else why not."""
    url = api_base.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(url, timeout=seconds):
            return ""
    except urllib.error.HTTPError:
        return ""  # it answered: reachable, whatever it thinks of /models
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{type(reason).__name__}: {reason}"


def model_checks(conf, complete=None):
    """Yield (level, message) pairs about the extraction model."""
    ex = conf.extract
    if not ex.model:
        yield (
            "OK",
            (
                "extractor: deterministic (no [extract] model); a local model takes one step: "
                "docs/local-model.md"
            ),
        )
        return
    if not ex.api_base:
        yield (
            "OK",
            f"extract.model {ex.model}: a hosted provider, not probed by doctor (no [extract] api_base)",
        )
        return
    where = f"{ex.model} at {ex.api_base}"
    why = reachable(ex.api_base)
    if why:
        yield (
            "FAIL",
            (
                f"model server {ex.api_base} is not reachable ({why}): start it (docs/local-model.md) or "
                "fix [extract] api_base; meanwhile drains keep batches and then use the deterministic extractor"
            ),
        )
        return
    # find the form afresh: the server may have changed
    structured.forget(ex.model, ex.api_base)
    probing = conf.model_copy(deep=True)
    probing.extract.max_answer_tokens = 32
    seconds = min(ex.timeout_seconds, PROBE_SECONDS)
    began = time.monotonic()
    try:
        completion = extract.call_bounded(
            complete or extract.litellm_complete, PROBE_MESSAGES, probing, seconds, response_format=Probe
        )
    except Exception as exc:  # noqa: BLE001 - any provider error is the finding
        yield (
            "FAIL",
            (
                f"model {where} does not answer a short probe within {seconds:g} s "
                f"({type(exc).__name__}: {str(exc)[:200]}): check that the server serves this model, "
                "and extract.timeout_seconds"
            ),
        )
        return
    took = time.monotonic() - began
    form = completion.form or "?"
    try:
        Probe.model_validate_json(extract.unfenced(completion.content))
    except ValidationError:
        yield (
            "WARN",
            (
                f"model {where} answers ({took:.1f} s) but not with valid JSON (structured output: {form}; "
                f"answer {completion.content[:80]!r}): its batches will fall back to the deterministic "
                "extractor; try a larger model"
            ),
        )
        return
    yield (
        "OK",
        (
            f"model {where} answers a short probe in {took:.1f} s; JSON output works "
            f"(structured output: {form})"
        ),
    )
