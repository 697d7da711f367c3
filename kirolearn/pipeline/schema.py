"""The pydantic model of a spooled event: the drainer's gate.

The hook writes events with the standard library (kirolearn.capture.events); this model
is the contract those files must meet. It lives off the hook path (pydantic
costs ~300 ms per process there) and is what the drainer validates against
before anything reaches the database; a file that fails goes to quarantine.
"""

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from kirolearn.capture import agents as _agents
from kirolearn.capture import events as _events
from kirolearn.core.ids import ULID_PATTERN
from kirolearn.core.observation_types import OBSERVATION_TYPES
from kirolearn.core.marks import DEFAULT_FRESHNESS, DEFAULT_OUTCOME, FRESHNESS, OUTCOMES

NonEmpty = Annotated[str, Field(min_length=1)]
Json = Any  # any value json.loads can produce


class Event(BaseModel):
    """One captured hook call (spool format version 2, see queue/README.md; version 1 had no `agent`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1, 2]
    agent: NonEmpty = "kiro"  # one of agents.names() (checked below); version 1 events are all Kiro's
    event_id: Annotated[str, Field(pattern=ULID_PATTERN)]
    kind: Literal["prompt", "tool_use", "session_summary", "note"]
    hook: NonEmpty
    trigger: NonEmpty
    generation: NonEmpty
    surface: NonEmpty  # these four: checked against the agent below
    session_id: Annotated[str, Field(min_length=1, max_length=256)]
    session_source: Literal["payload", "env", "session-file"]
    cwd: NonEmpty
    project_root: NonEmpty
    project_global: bool
    received_at: AwareDatetime
    client_version: NonEmpty
    actor: NonEmpty
    host: NonEmpty

    prompt: Optional[str] = None
    tool_name: Optional[NonEmpty] = None
    tool_input: Json = None
    tool_response: Union[dict, list, str, int, float, bool, None] = None
    assistant_response: Optional[str] = None
    extra: dict[str, Json] = Field(default_factory=dict)
    truncated: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _fields_match_kind(self) -> "Event":
        if self.agent not in _agents.names():
            raise ValueError(f"unknown agent {self.agent[:60]!r}")
        if self.generation not in _agents.get(self.agent).GENERATIONS:
            raise ValueError(f"generation {self.generation[:60]!r} is not one of agent {self.agent!r}'s")
        try:
            trigger, generation = _events.resolve_trigger(self.hook, self.agent)
        except _events.Rejected:
            raise ValueError(f"unknown hook name {self.hook[:60]!r}") from None
        if trigger != self.trigger:
            raise ValueError(f"trigger {self.trigger[:60]!r} does not match hook {self.hook!r}")
        if self.surface not in _agents.get(self.agent).SURFACES:
            raise ValueError(f"surface {self.surface!r} is not one of agent {self.agent!r}'s")
        if self.kind == "prompt" and self.prompt is None:
            raise ValueError("a prompt event needs a 'prompt' string (it may be empty)")
        if self.kind == "tool_use" and not self.tool_name:
            raise ValueError("a tool_use event needs 'tool_name'")
        if self.kind != "tool_use" and (self.tool_name is not None or self.tool_response is not None):
            raise ValueError(f"a {self.kind} event cannot carry tool fields")
        return self


ObservationType = Literal[OBSERVATION_TYPES]  # the tuple, written once in observation_types.py
TITLE_MAX, SUMMARY_MAX, FACT_MAX, CONCEPT_MAX, FILE_MAX = 200, 4000, 500, 100, 500
FACTS_COUNT_MAX = CONCEPTS_COUNT_MAX = 50
# A turn summary keeps both file lists whole; other records keep FILES_KEPT.
FILES_COUNT_MAX, FILES_KEPT = 400, 100
RECORD_ID_PATTERN = "^mr_" + ULID_PATTERN.lstrip("^")
FORGET_REASON_MAX = 500  # a forget's reason is kept (and shown) up to this many characters


class MemoryRecord(BaseModel):
    """One distilled memory with its provenance (what the memory_records table holds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    record_id: Annotated[str, Field(pattern=RECORD_ID_PATTERN)]
    project_id: NonEmpty
    project_root: NonEmpty
    session_id: NonEmpty
    title: Annotated[str, Field(min_length=1, max_length=TITLE_MAX)]
    summary: Annotated[str, Field(min_length=1, max_length=SUMMARY_MAX)]
    facts: list[Annotated[str, Field(min_length=1, max_length=FACT_MAX)]] = Field(
        default_factory=list, max_length=FACTS_COUNT_MAX)
    concepts: list[Annotated[str, Field(min_length=1, max_length=CONCEPT_MAX)]] = Field(
        default_factory=list, max_length=CONCEPTS_COUNT_MAX)
    files_touched: list[Annotated[str, Field(min_length=1, max_length=FILE_MAX)]] = Field(
        default_factory=list, max_length=FILES_COUNT_MAX
    )
    observation_type: ObservationType
    strategy: NonEmpty
    source_event_ids: list[NonEmpty] = Field(min_length=1)
    run_id: Optional[str] = None
    created_at: AwareDatetime
    # who made it (#16): the person, the machine, the agent (agents.names())
    actor: Optional[str] = None
    host: Optional[str] = None
    agent: Optional[str] = None
    # issue #31 (core.marks): how the turn ended, whether its files still are so
    outcome: Literal[OUTCOMES] = DEFAULT_OUTCOME
    freshness: Literal[FRESHNESS] = DEFAULT_FRESHNESS
    file_state: Optional[dict] = None


def clip(text: str, limit: int) -> str:
    """Cut `text` to `limit` characters, ending with an ellipsis when cut."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def clip_list(items, item_limit: int, count_limit: int) -> "list[str]":
    """Non-empty, de-duplicated (order kept), clipped strings, at most `count_limit`."""
    out: list = []
    for item in items or ():
        text = clip(str(item), item_limit)
        if text and text not in out:
            out.append(text)
        if len(out) == count_limit:
            break
    return out
