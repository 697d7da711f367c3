"""The extraction prompt and its schema, in one place, versioned.

`PROMPT_VERSION` names the prompt and the schema together: change either and bump it. Every
extraction run stores the version it asked with (extraction_runs.prompt_version) beside the
model's raw answer (extraction_runs.answer), so a bad record can be traced to the words that
asked for it.
"""

import json

from pydantic import BaseModel, Field

from kirolearn.core.observation_types import OBSERVATION_TYPES
from kirolearn.store.record import SUMMARY_MAX, TITLE_MAX, ObservationType

# 2: schema in the prompt for servers without json_schema
PROMPT_VERSION = "extract-2"


class Candidate(BaseModel):
    """One memory the model proposes."""

    observation_type: ObservationType
    title: str = Field(min_length=1, description=f"one line, at most {TITLE_MAX} characters")
    summary: str = Field(
        min_length=1, description=f"what happened and why it matters, at most {SUMMARY_MAX} characters"
    )
    facts: list[str] = Field(default_factory=list, description="short durable facts")
    concepts: list[str] = Field(default_factory=list, description="topics, lower case")
    files_touched: list[str] = Field(default_factory=list, description="paths relative to the project root")


class Extraction(BaseModel):
    """The model's whole answer: zero or more memories."""

    records: list[Candidate] = Field(default_factory=list, max_length=10)


SYSTEM_PROMPT = f"""You distil a coding agent's work into durable memory records for future sessions.
You receive the events of one session in order: the developer's prompts (kind=prompt), the agent's
tool calls with input and output (kind=tool_use), the agent's end-of-turn message
(kind=session_summary) and lifecycle notes (kind=note).
Answer with JSON only, matching: {{"records": [{{"observation_type": one of {"|".join(OBSERVATION_TYPES)},
"title": "...", "summary": "...", "facts": ["..."], "concepts": ["..."], "files_touched": ["..."]}}]}}.
Rules: keep knowledge that stays true (how the project works, decisions and their reasons, errors
and their fixes, conventions), not transient state. When the events include a session_summary
event, the first record must have observation_type "session_summary" and recap the turn: the
request, what was investigated, what was learned, what was done, what remains. Titles at most
{TITLE_MAX} characters, summaries at most {SUMMARY_MAX}. Paths relative to the project root. Text inside
[REDACTED:...] markers stays redacted. If nothing is worth remembering answer {{"records": []}}."""

SUMMARY_REQUEST = """Your answer has no record with observation_type "session_summary", yet these events end a
turn (kind=session_summary). Answer again with JSON only: {"records": [one record with observation_type
"session_summary" that recaps the turn: the request, what was investigated, what was learned, what was
done, what remains]}."""


def schema_of(model: "type[BaseModel]") -> dict:
    """The JSON Schema of `model` (what json_schema / json_object servers are given)."""
    return model.model_json_schema()


def schema_instruction(model: "type[BaseModel]") -> str:
    """The schema as words, for servers that cannot be given it as a parameter (json_object, text)."""
    schema = json.dumps(schema_of(model), separators=(",", ":"), ensure_ascii=False)
    return (
        "Answer with exactly one JSON object and nothing else: no prose, no code fence. "
        f"It must validate against this JSON Schema: {schema}"
    )
