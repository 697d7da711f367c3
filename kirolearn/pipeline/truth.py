"""Marks on evidence (design.md rule 16): supersede by a changed claim, merge identical work.

**Supersede.** A record is superseded only by a later turn that did not fail and wrote a different
value to one of its claims: the same file, kind and key (so the section too: `[staging]` and
`[production]` are two keys), a claim that holds in the working tree when the drain stores it (a
write reverted before then supersedes nothing). The older claim reads `changed`, naming the value
now and the record that changed it; the older record is superseded once none of its claims holds
(one setting of two changed: it stays, `changed`, with the other still current). Talk, questions,
hypotheticals and failed attempts write nothing, so they claim nothing and never supersede.

**Echoes.** A record that cites others (it read them back through kirolearn's MCP tools, or its
answer repeats a claim it was shown) makes no claim of its own: it is superseded with the record
it cites, by the same record, and ranks below it (kirolearn.core.marks.ECHO_FACTOR).

**Merge.** Records of one project merge only when their work is identical: the same signature
(kirolearn.pipeline.claims.work_signature: the same commands with the same arguments, the same
files written with the same claims, the same outcome; or the same question citing the same
records). Candidates are found by the signature's index, never by shared words.

**Pins.** A record restored from a supersede or a merge is pinned against that rule: it never
supersedes or merges it again (`show` says so).

Every mark names its evidence in the record's history and in logs/truth.log.
"""

from __future__ import annotations

from kirolearn.privacy import writes
from kirolearn.store.base import Store

# the rules a restore pins a record against
SUPERSEDE, MERGE = "supersede", "merge"


def pinned(record: dict, rule: str) -> bool:
    """Whether a person pinned the record against `rule` (a restore of its mark)."""
    return bool((record.get("pinned") or {}).get(rule))


def union(records: list[dict]) -> dict:
    """The list fields of a merged group: every source event, fact, concept and file, in first-seen order."""
    out = {}
    for key in ("source_event_ids", "facts", "concepts", "files_touched"):
        seen: dict = {}
        for rec in records:
            for value in rec.get(key) or ():
                seen.setdefault(value if not isinstance(value, (list, dict)) else str(value), value)
        out[key] = list(seen.values())
    return out


def merge_group(store: Store, group: dict, *, actor: str) -> bool:
    """Fold a group into its survivor, the newest (Store.merge_records)."""
    survivor = next(r for r in group["records"] if r["record_id"] == group["into"])
    ordered = [survivor] + [r for r in group["records"] if r is not survivor]
    others = [r["record_id"] for r in group["records"] if r is not survivor]
    return store.merge_records(
        group["into"], others, union(ordered), actor=actor, reason=writes.text(group["why"])
    )


def group_of(records: list[dict], why: str) -> dict | None:
    """A merge group of records with one signature (none pinned against merging), given in the order
    they were stored: the last stored is the survivor, whatever the clocks said."""
    members = [r for r in records if not pinned(r, MERGE) and not r.get("merged_into")]
    if len(members) < 2:
        return None
    return {
        "record_ids": [r["record_id"] for r in members],
        "into": members[-1]["record_id"],
        "why": why,
        "records": members,
    }


def _why_merged(record: dict) -> str:
    if record.get("cites") and not record.get("claims"):
        return "the same question, citing the same records"
    return "identical work: the same commands and arguments, the same files written with the same claims"


def supersede(store: Store, new: dict, *, log=None) -> list[list[str]]:
    """Mark what `new` changed (module docstring); returns [[old id, new id, why]]."""
    done: list[list[str]] = []
    if new.get("outcome") == "failed":
        return done
    holding = [
        c
        for c in store.claims_of([new["record_id"]]).get(new["record_id"], [])
        if c.get("state") == "current" and c.get("kind") != "lines"
    ]
    if not holding:
        return done
    olders = store.records_claiming(
        new["project_id"],
        [(c["file"], c["kind"], c["key"]) for c in holding],
        before=new.get("created_at") or "",
        exclude=[new["record_id"]],
        # the order they were stored in: a wrong clock cannot reorder it
        stored_before=new["record_id"],
    )
    by_identity = {(c["file"], c["kind"], c["key"]): c for c in holding}
    changed: dict[str, list[dict]] = {}
    states = []
    for old in olders:
        claim = by_identity.get((old["file"], old["kind"], old["key"])) or by_identity.get(
            (old.get("path") or "", old["kind"], old["key"])
        )
        if claim is None or old["digest"] == claim["digest"] or old.get("by_record"):
            continue  # the same value again changes nothing
        why = f"{_described(claim)} (was {old.get('shown') or '?'}) by {new['record_id']}"
        states.append(
            {
                **{k: old[k] for k in ("record_id", "file", "kind", "key")},
                "state": "changed",
                "now": claim.get("shown") or "",
                "by": new["record_id"],
                "why": why,
            }
        )
        changed.setdefault(old["record_id"], []).append({"claim": claim, "old": old, "why": why})
    if states:
        store.set_claim_states(states)
    for old_id, found in changed.items():
        current = store.get_record(old_id)
        if (
            current is None
            or current.get("superseded_by")
            or current.get("merged_into")
            or pinned(current, SUPERSEDE)
        ):
            continue
        claims = store.claims_of([old_id]).get(old_id, [])
        if any(c.get("state") == "current" for c in claims):
            # another of its claims still holds: changed, not superseded
            continue
        why = "; ".join(f["why"] for f in found)
        if store.set_mark(
            old_id, "superseded_by", new["record_id"], actor="drain", reason=writes.text(f"superseded: {why}")
        ):
            done.append([old_id, new["record_id"], why])
            if log:
                log(f"superseded {old_id} by {new['record_id']}: {why}")
            done += _echoes(store, old_id, new["record_id"], log=log)
    return done


def _echoes(store: Store, cited_id: str, by: str, *, log=None) -> list[list[str]]:
    """Supersede the echoes of a superseded record with it (an echo makes no claim of its own)."""
    done = []
    for echo_id in store.records_citing([cited_id]).get(cited_id, []):
        echo = store.get_record(echo_id)
        if echo is None or echo.get("claims") or echo.get("superseded_by") or pinned(echo, SUPERSEDE):
            continue
        why = f"it cites {cited_id}, which {by} superseded"
        if store.set_mark(
            echo_id, "superseded_by", by, actor="drain", reason=writes.text(f"superseded: {why}")
        ):
            done.append([echo_id, by, why])
            if log:
                log(f"superseded {echo_id} by {by}: {why}")
    return done


def _described(claim: dict) -> str:
    scope, _, name = (claim.get("key") or "").rpartition(".")
    where = f" [{scope}]" if scope and claim.get("kind") == "setting" else ""
    return f"{claim['file']}{where} {name if where else claim.get('key')} = {claim.get('shown')}"


def merge_identical(store: Store, new: dict, *, log=None) -> dict | None:
    """Merge `new` with the older live records of its project that did the identical work."""
    signature = new.get("work_signature")
    if not signature or new.get("merged_into") or pinned(new, MERGE):
        return None
    same = store.records_with_signature(new["project_id"], signature)
    group = group_of([r for r in same if r["record_id"] != new["record_id"]] + [new], _why_merged(new))
    if group is None or not merge_group(store, group, actor="drain"):
        return None
    if log:
        log(f"merged {', '.join(group['record_ids'])} into {group['into']} ({group['why']})")
    return {k: group[k] for k in ("record_ids", "into", "why")}


def mark_new(store: Store, record_ids: list[str], *, merge: bool = True, log=None) -> dict:
    """After new records are stored and their claims checked: supersede what they changed, then merge
    identical work. Returns {"superseded": [[old, new, why]], "merged": [groups]}."""
    done: dict = {"superseded": [], "merged": []}
    if not record_ids or not store.has_marks():
        return done
    # in the order the drain stored them (the spool's), not by their clocks
    fresh = [r for r in (store.get_record(rid) for rid in dict.fromkeys(record_ids)) if r]
    for new in fresh:
        done["superseded"] += supersede(store, new, log=log)
    if merge:
        for new in fresh:
            current = store.get_record(new["record_id"])
            merged = merge_identical(store, current, log=log) if current else None
            if merged:
                done["merged"].append(merged)
    return done


def signature_groups(store: Store, project_id: str) -> list[dict]:
    """The project's groups of identical work, oldest first (`kirolearn consolidate`)."""
    out = []
    for ids in store.signature_groups(project_id):
        records = [r for r in (store.get_record(rid) for rid in ids) if r]
        group = group_of(records, _why_merged(records[-1]) if records else "")
        if group is not None:
            out.append(group)
    out.sort(key=lambda g: (g["records"][0].get("created_at") or "", g["record_ids"][0]))
    return out
