"""The fake LLM server (tests/fakellm.py), exercised directly and through litellm itself."""

import json
import logging
import os
import threading
import urllib.error
import urllib.request

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
import litellm  # noqa: E402  (slow: imported once for the module)
from fakellm import NO_REPLY_BODY, FakeLLM  # noqa: E402

litellm.suppress_debug_info = True

# litellm's first completion makes pydantic warn about its own TypedDicts; not ours.
pytestmark = pytest.mark.filterwarnings("ignore:Items? .* `ReadOnly` qualifier:UserWarning")

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say hi"},
]
PROVIDERS = ["openai", "ollama_chat"]


@pytest.fixture
def llm(monkeypatch):
    """A running FakeLLM; OLLAMA_API_BASE points at it (litellm sends /api/show there)."""
    with FakeLLM() as fake:
        monkeypatch.setenv("OLLAMA_API_BASE", fake.ollama_base)
        yield fake


def complete(llm, provider, timeout=5, **kwargs):
    """One litellm.completion against the fake, no retries."""
    if provider == "openai":
        kwargs.update(api_base=llm.openai_base, api_key="fake", max_retries=0)
    else:
        kwargs.update(api_base=llm.ollama_base)
    return litellm.completion(model=f"{provider}/fake-model", messages=MESSAGES, timeout=timeout, **kwargs)


def post(url, payload, timeout=5):
    """POST JSON with urllib; return (status, body text)."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read().decode()


# -- the fake on its own ---------------------------------------------------------------


def test_bases_point_at_a_local_port(llm):
    assert llm.ollama_base == f"http://127.0.0.1:{llm.port}"
    assert llm.openai_base == f"http://127.0.0.1:{llm.port}/v1"


def test_openai_wire_format(llm):
    llm.enqueue("hello", prompt_tokens=3, completion_tokens=4)
    status, body = post(f"{llm.openai_base}/chat/completions", {"model": "m", "messages": MESSAGES})
    assert status == 200
    reply = json.loads(body)
    assert reply["object"] == "chat.completion"
    assert reply["model"] == "m"
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "hello"}
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


def test_ollama_wire_format(llm):
    llm.enqueue("hello")
    status, body = post(f"{llm.ollama_base}/api/chat", {"model": "m", "messages": MESSAGES})
    reply = json.loads(body)
    assert status == 200
    assert reply["message"] == {"role": "assistant", "content": "hello"}
    assert (reply["done"], reply["prompt_eval_count"], reply["eval_count"]) == (True, 12, 7)


def test_empty_queue_fails_loudly(llm):
    assert post(f"{llm.ollama_base}/api/chat", {"model": "m"}) == (500, NO_REPLY_BODY)
    assert post(f"{llm.openai_base}/chat/completions", {"model": "m"}) == (500, NO_REPLY_BODY)


def test_api_show_and_stream_do_not_consume_replies(llm):
    llm.enqueue("kept")
    status, body = post(f"{llm.ollama_base}/api/show", {"name": "m"})
    assert status == 200 and "model_info" in json.loads(body)
    status, _ = post(f"{llm.openai_base}/chat/completions", {"model": "m", "stream": True})
    assert status == 400
    assert llm.pending == 1


def test_get_and_unknown_paths_are_404(llm):
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{llm.openai_base}/models", timeout=5)
    err.value.close()
    assert err.value.code == 404
    assert post(f"{llm.ollama_base}/api/generate", {"model": "m"})[0] == 404


def test_requests_are_recorded_in_order(llm):
    post(f"{llm.ollama_base}/api/show", {"name": "m"})
    post(f"{llm.ollama_base}/api/chat", b"not json")
    assert llm.requests == [
        {"method": "POST", "path": "/api/show", "json": {"name": "m"}},
        {"method": "POST", "path": "/api/chat", "json": None},
    ]
    assert llm.chat_requests == llm.requests[1:]


def test_stop_cuts_a_delayed_reply_short():
    fake = FakeLLM().start()
    fake.enqueue(delay=30.0, content="never")
    outcome = []

    def call():
        try:
            outcome.append(post(f"{fake.ollama_base}/api/chat", {"model": "m"}, timeout=10))
        except Exception as exc:  # noqa: BLE001 - the server hangs up without answering
            outcome.append(exc)

    client = threading.Thread(target=call, daemon=True)
    client.start()
    fake.wait_for("/api/chat")
    stopper = threading.Thread(target=fake.stop, daemon=True)
    stopper.start()
    stopper.join(10.0)  # the reply is due in 30 s: returning within 10 means stop() cut it short
    assert not stopper.is_alive()
    client.join(10.0)
    assert not client.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], Exception)  # closed, unanswered
    assert not [t for t in threading.enumerate() if t.name.startswith("fakellm")]


# -- through litellm -------------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_litellm_success(llm, provider, caplog):
    llm.enqueue("Hi there.")
    with caplog.at_level(logging.WARNING):
        response = complete(llm, provider)
    assert response.choices[0].message.content == "Hi there."
    usage = response.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (12, 7, 19)
    assert not caplog.records  # no warnings from litellm
    assert llm.pending == 0


def test_litellm_custom_usage(llm):
    llm.enqueue("x", prompt_tokens=100, completion_tokens=1)
    usage = complete(llm, "openai").usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (100, 1, 101)


@pytest.mark.parametrize(
    "provider, path",
    [
        ("openai", "/v1/chat/completions"),
        ("ollama_chat", "/api/chat"),
    ],
)
def test_litellm_requests_record_the_messages(llm, provider, path):
    llm.enqueue("one")
    llm.enqueue("two")
    assert complete(llm, provider).choices[0].message.content == "one"
    assert complete(llm, provider).choices[0].message.content == "two"
    chats = llm.chat_requests
    assert [r["path"] for r in chats] == [path, path]
    body = chats[0]["json"]
    assert body["model"] == "fake-model"  # provider prefix stripped
    assert [(m["role"], m["content"]) for m in body["messages"]] == [
        (m["role"], m["content"]) for m in MESSAGES
    ]
    assert body.get("stream") in (None, False)


def test_litellm_ollama_asks_api_show_at_our_server(llm):
    llm.enqueue("hi")
    complete(llm, "ollama_chat")
    # Synchronous calls (via OLLAMA_API_BASE) come before the chat; another comes from
    # litellm's logging thread afterwards (via api_base). None of them consume replies.
    shows = llm.wait_for("/api/show")
    assert shows[0]["json"] == {"name": "fake-model"}
    assert llm.pending == 0


# Exact classes litellm 1.110.2 raises (all subclasses of litellm.APIError / openai.OpenAIError).
FAILURES = {
    ("openai", "500"): litellm.InternalServerError,
    ("ollama_chat", "500"): litellm.InternalServerError,
    ("openai", "malformed"): litellm.InternalServerError,
    ("ollama_chat", "malformed"): litellm.APIConnectionError,
}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_litellm_http_500(llm, provider):
    llm.enqueue(status=500, body="boom")
    with pytest.raises(litellm.InternalServerError) as err:
        complete(llm, provider)
    assert type(err.value) is FAILURES[provider, "500"]
    assert err.value.status_code == 500
    assert len(llm.chat_requests) == 1  # no retries


@pytest.mark.parametrize("provider", PROVIDERS)
def test_litellm_empty_queue_is_an_error(llm, provider):
    with pytest.raises(litellm.InternalServerError):
        complete(llm, provider)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_litellm_timeout(llm, provider):
    llm.enqueue(
        delay=30.0, content="late"
    )  # far past the timeout: only the client's own timer can end the call
    with pytest.raises(litellm.Timeout) as err:
        complete(llm, provider, timeout=0.5)
    assert type(err.value) is litellm.Timeout
    assert len(llm.chat_requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_litellm_malformed_body(llm, provider):
    llm.enqueue(raw='{"not": "a valid completion"')
    expected = FAILURES[provider, "malformed"]
    with pytest.raises(expected) as err:
        complete(llm, provider)
    assert type(err.value) is expected
    assert "delimiter" in str(err.value)  # the JSON decode error is in the message
