"""Static (lookup-table) embedding models: the "static/<name>" backend of the embeddings registry.

A model is a folder holding a token table and the `tokenizers` tokenizer.json that
splits text into its tokens; a text's vector is the mean of its tokens' rows, so
embedding is a tokenizer call and a numpy gather (no torch, no network). Two layouts:
  - kirolearn's own: table.npy (int8) + scale.npy (float32 per row) + tokenizer.json,
    as built by tools/distill_static.py; the shipped ones (SHIPPED; BUNDLED ships in the wheel)
    live in kirolearn/recall/static/;
  - a model2vec folder (model.safetensors with an "embeddings" tensor + tokenizer.json),
    e.g. a minishlab potion model a user downloaded; named by its absolute path.
`tokenizers` and `safetensors` already come with litellm and wordllama. Never imported by the hook.
"""

from __future__ import annotations

import json
import os

from kirolearn.recall.embeddings.base import EmbeddingModel, EmbeddingUnavailable

SHIPPED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "static")
BUNDLED = "minilm-l6-w30k"  # the table that ships in the wheel


def shipped_models() -> list[str]:
    """Names of the tables that ship inside the kirolearn package."""
    try:
        return sorted(
            n for n in os.listdir(SHIPPED) if os.path.isfile(os.path.join(SHIPPED, n, "tokenizer.json"))
        )
    except OSError:
        return []


class StaticModel(EmbeddingModel):
    """Mean of token rows from a lookup table."""

    batch_size = 1024

    def __init__(self, name: str):
        folder = name if os.path.isabs(name) else os.path.join(SHIPPED, name)
        if not name or not os.path.isfile(os.path.join(folder, "tokenizer.json")):
            raise EmbeddingUnavailable(
                f"no static embedding model {name!r}",
                f"use one of: {', '.join('static/' + n for n in shipped_models()) or '(none shipped)'}"
                ", or the absolute path of a model2vec folder",
            )
        self.folder = folder
        self.model_id = "static/" + (
            os.path.basename(os.path.normpath(folder)) if os.path.isabs(name) else name
        )
        self._table = None
        self._tokenizer = None
        self._unk = None
        self.dimensions = self._config().get("dims", 0)

    def _config(self) -> dict:
        try:
            with open(os.path.join(self.folder, "config.json"), encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, ValueError):
            return {}

    def _load(self):
        if self._table is not None:
            return
        try:
            import numpy as np
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(os.path.join(self.folder, "tokenizer.json"))
            if os.path.isfile(os.path.join(self.folder, "table.npy")):
                table = np.load(os.path.join(self.folder, "table.npy")).astype(np.float32)
                table *= np.load(os.path.join(self.folder, "scale.npy"))[:, None]
            else:
                from safetensors.numpy import load_file

                table = load_file(os.path.join(self.folder, "model.safetensors"))["embeddings"].astype(
                    np.float32
                )
        except ImportError as exc:
            raise EmbeddingUnavailable(
                f"the static embedding model needs a package that is missing ({exc})",
                "reinstall kirolearn (`pip install .`); search stays lexical meanwhile",
            ) from None
        except Exception as exc:  # noqa: BLE001
            # any unreadable or damaged file means: no vectors
            raise EmbeddingUnavailable(
                f"static model {self.model_id} could not load: {type(exc).__name__}: {exc}"
            ) from None
        unk = tokenizer.model.unk_token if hasattr(tokenizer.model, "unk_token") else None
        self._unk = tokenizer.token_to_id(unk) if unk else None
        self._tokenizer, self._table = tokenizer, table
        self.dimensions = int(table.shape[1])

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids (unknown tokens dropped)."""
        self._load()
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [[i for i in e.ids if i != self._unk] for e in encodings]

    def _embed(self, texts):
        import numpy as np

        ids = self.token_ids(texts)
        out = np.zeros((len(ids), self._table.shape[1]), dtype=np.float32)
        lengths = np.array([len(x) for x in ids], dtype=np.int64)
        filled = np.flatnonzero(lengths)
        if len(filled):
            flat = np.fromiter((i for x in ids for i in x), dtype=np.int64, count=int(lengths.sum()))
            starts = np.concatenate(([0], np.cumsum(lengths[filled])[:-1]))
            out[filled] = np.add.reduceat(self._table[flat], starts, axis=0) / lengths[filled][:, None]
        return out
