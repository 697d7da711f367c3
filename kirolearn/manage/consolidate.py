"""`kirolearn consolidate`: groups of near-duplicate records of a project, previewed or merged (issue #31).

Two records are the same chore when kirolearn.pipeline.truth.same_chore says so (the same commands,
no error in either, the same files; a record that does not say what it ran is never grouped). The
preview changes nothing. `apply` folds each group into its newest record, which keeps every source
event and the union of facts, concepts and files; the others get `merged_into` = that survivor
(recall hides them; nothing is deleted; `kirolearn restore ID` brings one back). Candidates come
from the FTS index, a few per record of the project: the records that ran a command are read once,
each compared with the few older ones FTS finds by its commands' words.
"""

from kirolearn.manage.records import ManageError, writable, clean, open_existing, project_id_of
from kirolearn.pipeline import truth
from kirolearn.store.sqlite import records as recordstore

SCAN_LIMIT = 5000  # the project's newest records a preview looks at


def find_groups(*, project_root=None, db=None, limit: int = SCAN_LIMIT) -> "list[dict]":
    """The project's groups of near duplicates, oldest group first: {"record_ids", "into", "why", "records"}."""
    db = db or open_existing()
    if db is None or not recordstore.has_marks(db):
        return []
    pid = project_id_of(project_root)
    if pid is None:
        raise ManageError("consolidate works on one project", "run it inside the project, or give --project")
    # a record that does not say what it ran (IDE 0.x) is never grouped
    records = [r for r in recordstore.list_records(db, limit=limit, project_id=pid)
               if not r.get("merged_into") and truth.commands(r)]

    def candidates(rec):
        return recordstore.mark_candidates(db, pid, truth.chore_words(rec), exclude=[rec["record_id"]],
                                           limit=truth.CANDIDATES)

    return truth.groups(records, candidates, rule=truth.same_chore)


def consolidate(*, project_root=None, apply: bool = False, actor: str = "cli", db=None) -> dict:
    """{"groups": [{"record_ids", "into", "why"}], "applied": bool}; merges them when `apply`."""
    db = (db or writable()) if apply else (db or open_existing())
    found = find_groups(project_root=project_root, db=db)
    merged = []
    if apply:
        for group in found:
            if truth.merge_group(db, group, actor=actor):
                merged.append(group)
        if merged:
            from kirolearn.recall.semantic import enrich_sessions

            enrich_sessions(db, [(r["project_id"], r["session_id"]) for g in merged for r in g["records"]])
    return {"groups": clean([{k: g[k] for k in ("record_ids", "into", "why")} for g in found]), "applied": apply,
            "merged": sum(len(g["record_ids"]) - 1 for g in merged)}
