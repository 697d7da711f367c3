"""The "static/<name>" embedding backend (issue #11): kirolearn's own distilled lookup table, loaded
for real from the package with numpy and `tokenizers`, through the drain, search, doctor and reindex."""

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import as_store

from kirolearn.cli.commands import cli
from kirolearn.recall import lexical, semantic
from kirolearn.recall.embeddings import registry as embeddings
from kirolearn.recall.embeddings import static as static_model
from kirolearn.store.sqlite import db as store

SPEC = "static/" + static_model.BUNDLED


def spool_turn(project, session_id, prompt, outcome=None):
    from kirolearn.capture import events, spool

    payload = {
        "hook_event_name": "userPromptSubmit",
        "cwd": str(project),
        "session_id": session_id,
        "prompt": prompt,
    }
    event = events.build_event("userPromptSubmit", payload)
    spool.append(event["event_id"], events.serialize(event))
    if outcome is not None:
        payload = {
            "hook_event_name": "stop",
            "cwd": str(project),
            "session_id": session_id,
            "assistant_response": outcome,
        }
        event = events.build_event("stop", payload)
        spool.append(event["event_id"], events.serialize(event))


def test_the_bundled_table_ships_in_the_package_and_loads_offline():
    assert static_model.BUNDLED in static_model.shipped_models()
    model = embeddings.get_model(SPEC)
    assert model.model_id == SPEC
    vectors = model.embed_batch(
        [
            "the database is locked while the drainer writes",
            "sqlite busy timeout and WAL journal mode",
            "I dyed my hair purple for the concert",
            "",
        ]
    )
    assert vectors.shape == (4, model.dimensions) and vectors.dtype == np.float32
    assert (
        np.allclose(np.linalg.norm(vectors[:3], axis=1), 1.0) and not vectors[3].any()
    )  # no token: zero row
    related, unrelated = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    assert related > unrelated + 0.1


def test_a_text_vector_is_the_mean_of_its_token_rows():
    model = embeddings.get_model(SPEC)
    ids = model.token_ids(["deadlock in postgres", "deadlock"])
    rows = model._table[ids[0]].mean(axis=0)
    assert np.allclose(model._embed(["deadlock in postgres"])[0], rows, atol=1e-6)
    assert len(ids[1]) == 1  # a whole word of the added vocabulary is one token


def test_unknown_and_damaged_tables_are_embedding_errors(tmp_path):
    with pytest.raises(embeddings.EmbeddingUnavailable, match="no static embedding model"):
        embeddings.get_model("static/nosuch")
    broken = tmp_path / "broken"
    shutil.copytree(static_model.SHIPPED + "/" + static_model.BUNDLED, broken)
    (broken / "table.npy").write_bytes(b"not a numpy file")
    model = embeddings.get_model(f"static/{broken}")
    assert model.model_id == "static/broken"
    with pytest.raises(embeddings.EmbeddingUnavailable, match="could not load"):
        model.embed_batch(["x"])


def test_a_table_that_cannot_load_leaves_search_lexical_and_doctor_says_so(
    project, add_record, monkeypatch, tmp_path
):
    broken = tmp_path / "damaged"
    shutil.copytree(static_model.SHIPPED + "/" + static_model.BUNDLED, broken)
    (broken / "scale.npy").unlink()
    monkeypatch.setenv("KIROLEARN_EMBEDDING_MODEL", f"static/{broken}")
    add_record(project, "database is locked during export", "use WAL")
    searcher = semantic.Searcher(as_store(lexical.connect_readonly()))
    assert searcher.model is None and "could not load" in searcher.error
    assert [h.title for h in searcher.search("locked export")] == ["database is locked during export"]
    doctor = CliRunner().invoke(cli, ["doctor"], catch_exceptions=False).output
    assert "semantic recall is off, search falls back to words alone" in doctor and "static/damaged" in doctor


def test_a_model2vec_folder_loads_by_its_path(tmp_path):
    """A model2vec layout (model.safetensors + tokenizer.json), e.g. a potion model a user downloaded."""
    from safetensors.numpy import save_file

    src = embeddings.get_model(SPEC)
    src._load()
    folder = tmp_path / "my-m2v"
    folder.mkdir()
    shutil.copy(
        static_model.SHIPPED + "/" + static_model.BUNDLED + "/tokenizer.json", folder / "tokenizer.json"
    )
    save_file({"embeddings": src._table.astype(np.float16)}, str(folder / "model.safetensors"))
    model = embeddings.get_model(f"static/{folder}")
    a, b = (
        model.embed_batch(["rotate the leaked stripe key"])[0],
        src.embed_batch(["rotate the leaked stripe key"])[0],
    )
    assert model.model_id == "static/my-m2v" and float(a @ b) > 0.999


def test_drain_embeds_with_it_and_search_uses_it(project, drain_now, monkeypatch):
    monkeypatch.setenv("KIROLEARN_EMBEDDING_MODEL", SPEC)
    spool_turn(
        project,
        "s1",
        "Users get logged out after exactly 15 minutes even while active",
        "The access token expired; an interceptor now refreshes it on 401",
    )
    for i in range(30):
        spool_turn(project, f"n{i // 10}", f"update the changelog for release 1.{i}")
    stats, db = drain_now(flush=True)
    assert stats.records_embedded == 31 and stats.embedding_error == ""
    assert as_store(db.conn).derived().vector_counts() == {SPEC: 31}
    hits = semantic.Searcher(as_store(lexical.connect_readonly())).vector_only(
        "session dropped while people were working", limit=1
    )
    assert hits[0].title.startswith("Users get logged out")


def test_changing_the_model_is_reported_and_reindex_switches(project, drain_now, monkeypatch):
    for i in range(4):
        spool_turn(project, "s1", f"turn {i} about the cache of product prices", f"answer {i}")
    monkeypatch.setenv("KIROLEARN_EMBEDDING_MODEL", embeddings.DEFAULT_MODEL)
    drain_now(flush=True)
    monkeypatch.setenv("KIROLEARN_EMBEDDING_MODEL", SPEC)
    doctor = CliRunner().invoke(cli, ["doctor"], catch_exceptions=False).output
    assert f"embedding model {SPEC} loads" in doctor
    assert f"4 of 4 records have no {SPEC} vector yet" in doctor
    assert f"4 have vectors of {embeddings.DEFAULT_MODEL}" in doctor
    out = json.loads(CliRunner().invoke(cli, ["reindex", "--json"], catch_exceptions=False).output)
    assert out["model"] == SPEC and out["embedded"] == 4 and out["dropped"] == 4
    assert as_store(store.open_db().conn).derived().vector_counts() == {SPEC: 4}
