"""A record's marks that this module names once: `freshness` and `outcome`.

Standard library only: the hook's recall (kirolearn.recall.lexical ranks by them,
kirolearn.recall.context labels lines with them) imports it. docs/memory-marks.md says
how each mark is decided, what it costs and how to undo it.

- freshness: the worst state of the record's claims about the code (kirolearn.claims):
  `current` (each still holds, or it makes none), `changed` (a setting, name or line it
  cites holds something else now), `deleted` (what it cites is gone, after following a
  move). Kept by the drain; the hook re-checks a line's claims before showing it.
- outcome: `failed` (the turn's work ended in failure and nothing later in the turn
  fixed it), `succeeded` (its commands ended well), `unknown`. Set at extraction
  (kirolearn.pipeline.extract.turn_outcome).

Recall multiplies a record's score by `factor(freshness, outcome)`: a record about a
file rewritten since, or deleted, or a failed attempt, still comes back when nothing
better matches, but below a record of the same relevance that is still true.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:  # types only: `typing` would cost the hook its import
    from collections.abc import Mapping
    from typing import Any

FRESHNESS = ("current", "changed", "deleted")
OUTCOMES = ("failed", "succeeded", "unknown")
# old records, until checked
DEFAULT_FRESHNESS, DEFAULT_OUTCOME = "current", "unknown"

# Recall's demotion factors (lexical, semantic fusion, the recall server).
FRESHNESS_FACTORS = {"current": 1.0, "changed": 0.6, "deleted": 0.4}
OUTCOME_FACTORS = {"failed": 0.5, "succeeded": 1.0, "unknown": 1.0}
# a record a newer one superseded (superseded_by); a merged one is not returned
SUPERSEDED_FACTOR = 0.1
ECHO_FACTOR = 0.5  # a record that repeats others (cites): below what it cites

# What the context block says on a marked record's line.
FRESHNESS_LABELS = {"changed": "changed since", "deleted": "gone since"}
OUTCOME_LABELS = {"failed": "failed attempt"}


def factor(freshness: "str | None", outcome: "str | None") -> float:
    """How much of its score a record keeps in recall (1.0: a current record, or an unmarked one)."""
    return FRESHNESS_FACTORS.get(freshness or DEFAULT_FRESHNESS, 1.0) * OUTCOME_FACTORS.get(
        outcome or DEFAULT_OUTCOME, 1.0
    )


def record_factor(record: "Mapping[str, Any]") -> float:
    """factor() times SUPERSEDED_FACTOR for a superseded record: what a store's own search (the
    Store contract's `search`, SQLite and the team store alike) multiplies a match's relevance by."""
    keep = factor(record.get("freshness"), record.get("outcome"))
    return keep * SUPERSEDED_FACTOR if record.get("superseded_by") else keep


def labels(freshness: "str | None", outcome: "str | None") -> "list[str]":
    """The words a context-block line carries for these marks ([] for a current record of any other outcome)."""
    out = []
    if outcome in OUTCOME_LABELS:
        out.append(OUTCOME_LABELS[outcome])
    if freshness in FRESHNESS_LABELS:
        out.append(FRESHNESS_LABELS[freshness])
    return out
