"""The interface every embedding model keeps (EmbeddingModel) and the error of one that cannot run.

Its own module, below the registry (kirolearn.recall.embeddings.registry) and the backends it names
(the built-in wordllama and litellm ones, local.py, static.py): a backend imports
the interface, the registry imports the backends, never the other way round.
"""

from __future__ import annotations

from collections.abc import Iterable

from kirolearn.core.errors import KirolearnError


class EmbeddingUnavailable(KirolearnError, RuntimeError):
    """The configured embedding model cannot be loaded or called; recall stays lexical."""

    default_fix = 'run `kirolearn doctor`; search keeps working on words alone (set embeddings.model = "none" to silence this)'


class EmbeddingModel:
    """One embedding model. Subclasses set model_id, dimensions and implement `_embed`.

    How search fuses this model's cosine with BM25 (kirolearn/recall/semantic.py) is the model's,
    chosen per model (a stronger model carries more weight); the defaults are wordllama's,
    chosen on LoCoMo (docs/benchmarks.md, 'Embedding models side by side'):
    - lexical_weight, vector_weight: the weighted fusion.
    - vector_only_min_similarity: the cosine a record needs to be returned on meaning alone (no
      query word reaches it); in a large store no floor tells a paraphrase from an unrelated
      question.
    - lexical_coverage_power: > 0, a lexical match counts by (share of query words it holds) ** this.
    - route_below_coverage: > 0, when no lexical candidate of the best 10 holds this share of the
      query's words, rank by the vector alone (routed fusion); 0 keeps the weighted fusion always.
    - prompt_min_similarity: the prompt hook, through the recall server, injects a record on
      meaning alone at this cosine or more; None: only records that hold the prompt's words.
    - embeds_parts: True, a record holding a request and an outcome is embedded as each of the two
      (and as its whole text when that holds more; semantic.record_parts) and scores its best
      part's cosine; False, the whole text only.
    """

    model_id: str = ""
    dimensions: int = 0
    batch_size: int = 256
    # fusion weights with BM25 (see the class docstring)
    lexical_weight: float = 0.8
    vector_weight: float = 0.2
    vector_only_min_similarity: float = 0.20
    lexical_coverage_power: float = 0.0
    route_below_coverage: float = 0.0
    prompt_min_similarity: float | None = None
    embeds_parts: bool = False

    def _embed(self, texts: list[str]):  # -> numpy array (n, dimensions)
        raise NotImplementedError

    def embed_batch(self, texts: Iterable[str]):
        """float32 array (n, dimensions), each row unit length (zero rows stay zero)."""
        import numpy as np

        texts = [t if isinstance(t, str) else str(t) for t in texts]
        parts = []
        for i in range(0, len(texts), max(1, self.batch_size)):
            chunk = texts[i : i + self.batch_size]
            if chunk:
                parts.append(np.asarray(self._embed(chunk), dtype=np.float32).reshape(len(chunk), -1))
        if not parts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        vectors = np.vstack(parts)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1.0, norms)

    def embed(self, text: str):
        """One text's unit vector."""
        return self.embed_batch([text])[0]
