"""The observation types of a memory record, written out once.

Standard library only, so the hook's recall (kirolearn.recall.lexical weighs by
type, kirolearn.recall.context picks the notable ones) can import it; schema.py
(pydantic) cannot be on that path. Everything else derives from these tuples:
schema.ObservationType, the CLI's `--type` choices, the MCP tools' Literal types,
the extraction prompt and recall's TYPE_WEIGHTS keys. tests/test_constants.py
fails if one of them drifts.
"""

# `conversation`: a turn with no tool use that names nothing of the project ("write a haiku"): kept,
# searchable at a low weight, never listed at session start.
OBSERVATION_TYPES = ("tool_use", "decision", "error", "discovery", "pattern", "session_summary", "conversation")
# What an agent may save as one observation (save_observation): turn summaries have their own tool.
# (Nor chatter: what an agent saves on purpose is knowledge.)
HAND_MADE_TYPES = tuple(t for t in OBSERVATION_TYPES if t not in ("session_summary", "conversation"))
# What a session start lists beside the last turn summary: everything but routine tool use and chatter.
# One name per record kind, everywhere a kind is shown (CLI, MCP, viewer, context block, demo): its
# type. A session_end record is stored as a session_summary (the seed's schema) with this strategy,
# and is shown as `session_end`: it summarises a session, not a turn.
SESSION_END_STRATEGY = "mcp_session_end"
SESSION_END_KIND = "session_end"


def kind_label(observation_type: str, strategy: "str | None" = None) -> str:
    """The name a record's kind is shown under: its observation type, `session_end` for a session end."""
    return SESSION_END_KIND if strategy == SESSION_END_STRATEGY else str(observation_type)


NOTABLE_TYPES = tuple(t for t in OBSERVATION_TYPES if t not in ("tool_use", "conversation"))
