"""The pydantic model of a spooled event: the drainer's gate.

The hook writes events with the standard library (kirolearn.capture.events); this model
is the contract those files must meet. It lives off the hook path (pydantic
costs ~300 ms per process there) and is what the drainer validates against
before anything reaches the database; a file that fails goes to quarantine.
"""

from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from kirolearn.capture import agents as _agents
from kirolearn.capture import events as _events
from kirolearn.core.ids import ULID_PATTERN
from kirolearn.store.record import NonEmpty

Json = Any  # any value json.loads can produce


class Event(BaseModel):
    """One captured hook call (spool format version 3, see queue/README.md; version 2 had no `project_id`,
    version 1 no `agent`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1, 2, 3]
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
    # version 3: core.project.project_id of project_root, computed by the hook (absent before)
    project_id: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")] | None = None
    received_at: AwareDatetime
    client_version: NonEmpty
    actor: NonEmpty
    host: NonEmpty

    prompt: str | None = None
    tool_name: NonEmpty | None = None
    tool_input: Json = None
    tool_response: dict | list | str | int | float | bool | None = None
    assistant_response: str | None = None
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
