"""A memory record: the pydantic model of what the memory_records table holds, and its limits.

Every backend stores records of this shape (kirolearn.store.base speaks of them as plain dicts with
these fields); the drain, summaries, the MCP server and `import` validate against it.
"""

from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from kirolearn.core.ids import ULID_PATTERN
from kirolearn.core.marks import DEFAULT_FRESHNESS, DEFAULT_OUTCOME, FRESHNESS, OUTCOMES
from kirolearn.core.observation_types import OBSERVATION_TYPES

NonEmpty = Annotated[str, Field(min_length=1)]
# the tuple, written once in observation_types.py
ObservationType = Literal[OBSERVATION_TYPES]  # type: ignore[valid-type]
TITLE_MAX, SUMMARY_MAX, FACT_MAX, CONCEPT_MAX, FILE_MAX = 200, 4000, 500, 100, 500
FACTS_COUNT_MAX = CONCEPTS_COUNT_MAX = 50
# A turn summary keeps both file lists whole; other records keep FILES_KEPT.
FILES_COUNT_MAX, FILES_KEPT = 400, 100
RECORD_ID_PATTERN = "^mr_" + ULID_PATTERN.lstrip("^")
# a turn's claims kept, at most (kirolearn.pipeline.claims)
CLAIMS_COUNT_MAX = 120
# a forget's reason is kept (and shown) up to this many characters
FORGET_REASON_MAX = 500


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
        default_factory=list, max_length=FACTS_COUNT_MAX
    )
    concepts: list[Annotated[str, Field(min_length=1, max_length=CONCEPT_MAX)]] = Field(
        default_factory=list, max_length=CONCEPTS_COUNT_MAX
    )
    files_touched: list[Annotated[str, Field(min_length=1, max_length=FILE_MAX)]] = Field(
        default_factory=list, max_length=FILES_COUNT_MAX
    )
    observation_type: ObservationType
    strategy: NonEmpty
    source_event_ids: list[NonEmpty] = Field(min_length=1)
    run_id: str | None = None
    created_at: AwareDatetime
    # who made it: the person, the machine, the agent (agents.names())
    actor: str | None = None
    host: str | None = None
    agent: str | None = None
    # core.marks: how the turn ended, whether what it claims still holds
    outcome: Literal[OUTCOMES] = DEFAULT_OUTCOME  # type: ignore[valid-type]
    freshness: Literal[FRESHNESS] = DEFAULT_FRESHNESS  # type: ignore[valid-type]
    file_state: dict | None = None
    # its claims on the code, the records it repeats, its signature
    claims: list[dict] = Field(default_factory=list, max_length=CLAIMS_COUNT_MAX)
    cites: list[Annotated[str, Field(pattern=RECORD_ID_PATTERN)]] = Field(default_factory=list, max_length=50)
    work_signature: str | None = None


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
