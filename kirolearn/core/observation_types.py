"""The observation types of a memory record, written out once.

Standard library only, so the hook's recall (kirolearn.recall.lexical weighs by
type, kirolearn.recall.context picks the notable ones) can import it; schema.py
(pydantic) cannot be on that path. Everything else derives from these tuples:
schema.ObservationType, the CLI's `--type` choices, the MCP tools' Literal types,
the extraction prompt and recall's TYPE_WEIGHTS keys. tests/test_constants.py
fails if one of them drifts.
"""

# conversation: chatter ("write a haiku"), searchable but never listed at start
OBSERVATION_TYPES = (
    "tool_use",
    "decision",
    "error",
    "discovery",
    "pattern",
    "session_summary",
    "conversation",
)
# save_observation's types: summaries have their own tool; chatter is none
HAND_MADE_TYPES = tuple(t for t in OBSERVATION_TYPES if t not in ("session_summary", "conversation"))
# a session end is stored as a session_summary (the seed's schema), shown apart
SESSION_END_STRATEGY = "mcp_session_end"
SESSION_END_KIND = "session_end"


def kind_label(observation_type: str, strategy: "str | None" = None) -> str:
    """The name a record's kind is shown under: its observation type, `session_end` for a session end.

    One name per record kind wherever a kind is shown (CLI, MCP, viewer, context block, demo). A
    session end is stored as a session_summary with SESSION_END_STRATEGY and shown as `session_end`:
    it summarises a session, not a turn."""
    return SESSION_END_KIND if strategy == SESSION_END_STRATEGY else str(observation_type)


# listed at session start: no routine tool use, no chatter
NOTABLE_TYPES = tuple(t for t in OBSERVATION_TYPES if t not in ("tool_use", "conversation"))
