"""The pydantic model of a spooled event: the drainer's gate.

The hook writes events with the standard library (kirolearn.events); this model
is the contract those files must meet. It lives off the hook path (pydantic
costs ~300 ms per process there) and is what the drainer validates against
before anything reaches the database; a file that fails goes to quarantine.
"""

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from .ids import ULID_PATTERN

NonEmpty = Annotated[str, Field(min_length=1)]
Json = Any  # any value json.loads can produce


class Event(BaseModel):
    """One captured hook call (spool format version 1, see queue/README.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1]
    event_id: Annotated[str, Field(pattern=ULID_PATTERN)]
    kind: Literal["prompt", "tool_use", "session_summary", "note"]
    hook: NonEmpty
    trigger: NonEmpty
    generation: Literal["classic", "v3", "ide-legacy", "unknown"]
    surface: Literal["kiro-cli", "kiro-ide"]
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
        if self.kind == "prompt" and self.prompt is None:
            raise ValueError("a prompt event needs a 'prompt' string (it may be empty)")
        if self.kind == "tool_use" and not self.tool_name:
            raise ValueError("a tool_use event needs 'tool_name'")
        if self.kind != "tool_use" and (self.tool_name is not None or self.tool_response is not None):
            raise ValueError(f"a {self.kind} event cannot carry tool fields")
        return self
