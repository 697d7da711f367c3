"""How every backend weighs a record's text fields in search: a title outweighs a summary.

Part of the store contract (kirolearn.store.base): SQLite's bm25() arguments and PostgreSQL's
ts_rank weights are both made from this table.
"""

FIELD_WEIGHTS = {
    "title": 8.0,
    "concepts": 4.0,
    "files_touched": 3.0,
    "facts": 2.0,
    "expansion": 2.0,
    "summary": 1.0,
}
