"""Structured output in the form each server accepts, remembered per model.

Servers differ in what `response_format` they take: hosted APIs take a JSON Schema
(`{"type": "json_schema", ...}`), llama.cpp's server answers HTTP 500 "Input should be 'text' or
'json_object'" to that but constrains `{"type": "json_object", "schema": {...}}` by a grammar, and
some take neither. So a call tries the forms in `FORMS` order, steps down on an error that says the
form is unsupported, and remembers which form worked for the model and endpoint (in this process
and in `$KIROLEARN_HOME/state/llm_forms.json`), so later calls go straight to it. Whatever the
form, the answer is validated by pydantic afterwards: a form only makes a good answer likelier.
"""

import re
import threading

from kirolearn.core import isotime
from kirolearn.pipeline.prompt import schema_instruction, schema_of
from kirolearn.store import state

FORMS = ("json_schema", "json_object", "text")
STATE_NAME = "llm_forms"

# How servers refuse a response_format (llama.cpp, OpenAI-compatible others).
_UNSUPPORTED = re.compile(
    r"response_format|json_schema|json_object|structured output|Input should be|"
    r"not supported|unsupported|grammar",
    re.I,
)

_lock = threading.Lock()
_known: "dict[str, str]" = {}


def key_of(model: str, api_base: str = "") -> str:
    """The memory's key: the model string and the endpoint it is served from."""
    return f"{model}@{api_base}" if api_base else model


def remembered(model: str, api_base: str = "") -> "str | None":
    """The form that last worked for this model and endpoint (this process first, then the state dir)."""
    key = key_of(model, api_base)
    with _lock:
        if key in _known:
            return _known[key]
    entry = state.read(STATE_NAME).get(key)
    form = entry.get("form") if isinstance(entry, dict) else None
    if form in FORMS:
        with _lock:
            _known[key] = form
        return form
    return None


def remember(model: str, api_base: str, form: str) -> None:
    """Note that `form` worked; written to the state dir only when it changed."""
    key = key_of(model, api_base)
    with _lock:
        same = _known.get(key) == form
        _known[key] = form
    if same:
        return
    data = state.read(STATE_NAME)
    data[key] = {"form": form, "at": isotime.now_iso()}
    try:
        state.write(STATE_NAME, data)
    except OSError:
        pass  # a read-only home: remembered in this process only


def forget(model: str = "", api_base: str = "") -> None:
    """Drop what was remembered (all of it with no model): the next call probes again."""
    with _lock:
        if model:
            _known.pop(key_of(model, api_base), None)
        else:
            _known.clear()
    data = state.read(STATE_NAME)
    if model:
        data.pop(key_of(model, api_base), None)
    else:
        data = {}
    try:
        state.write(STATE_NAME, data)
    except OSError:
        pass


def forms_to_try(model: str, api_base: str = "") -> "tuple[str, ...]":
    """The remembered form and those below it; every form when none is remembered."""
    form = remembered(model, api_base)
    return FORMS[FORMS.index(form) :] if form else FORMS


def unsupported(exc: BaseException) -> bool:
    """Does this error say the server refused the response_format (a 4xx/5xx naming it)?"""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or not 400 <= status < 600 or status in (401, 403, 404, 408, 429):
        return False
    return bool(_UNSUPPORTED.search(str(getattr(exc, "message", "") or exc)[:4000]))


def request(form: str, messages: "list[dict]", model) -> "tuple[list[dict], dict | type | None]":
    """The messages and the `response_format` argument for `form` (None: send none).

    json_schema: the pydantic model (litellm turns it into a JSON Schema);
    json_object: {"type": "json_object", "schema": ...} plus the schema in the system message;
    text: no response_format, the schema in the system message only.
    """
    if form == "json_schema":
        return messages, model
    words = schema_instruction(model)
    if messages and messages[0].get("role") == "system":
        messages = [dict(messages[0], content=messages[0]["content"] + "\n" + words)] + list(messages[1:])
    else:
        messages = [{"role": "system", "content": words}] + list(messages)
    if form == "json_object":
        return messages, {"type": "json_object", "schema": schema_of(model)}
    return messages, None
