"""`kirolearn consolidate`: a project's groups of identical work, previewed or merged.

Records are one group when their work is identical (kirolearn.pipeline.truth: the same signature,
found by its index): the same commands with the same arguments, the same files written with the
same claims, the same outcome; or the same question citing the same records. The preview changes
nothing. `apply` folds each group into its newest record, which keeps every source event and the
union of facts, concepts and files; the others get `merged_into` = that survivor (recall hides
them; nothing is deleted; `kirolearn restore ID` brings one back, pinned against merging).
"""

from kirolearn.manage.records import ManageError, clean, open_existing, project_id_of, writable
from kirolearn.pipeline import truth


def find_groups(*, project_root=None, store=None) -> "list[dict]":
    """The project's groups of identical work, oldest first: {"record_ids", "into", "why", "records"}."""
    store = store or open_existing()
    if store is None or not store.has_marks():
        return []
    pid = project_id_of(project_root)
    if pid is None:
        raise ManageError("consolidate works on one project", "run it inside the project, or give --project")
    return truth.signature_groups(store, pid)


def consolidate(*, project_root=None, apply: bool = False, actor: str = "cli", store=None) -> dict:
    """{"groups": [{"record_ids", "into", "why"}], "applied": bool}; merges them when `apply`."""
    store = (store or writable()) if apply else (store or open_existing())
    found = find_groups(project_root=project_root, store=store)
    merged = []
    if apply:
        for group in found:
            if truth.merge_group(store, group, actor=actor):
                merged.append(group)
        if merged:
            from kirolearn.recall.semantic import enrich_sessions

            enrich_sessions(store, [(r["project_id"], r["session_id"]) for g in merged for r in g["records"]])
    return {
        "groups": clean([{k: g[k] for k in ("record_ids", "into", "why")} for g in found]),
        "applied": apply,
        "merged": sum(len(g["record_ids"]) - 1 for g in merged),
    }
