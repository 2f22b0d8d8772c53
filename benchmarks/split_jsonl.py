#!/usr/bin/env python3
"""Split a JSONL file into a training and a validation file for `edge-plm train switch`:
every N-th line (index % N == 0, counting from 0) goes to validation, the rest to training, in
file order.

    python3 benchmarks/split_jsonl.py models/data/switch-dev-train.jsonl --every 5 --out runs/dev-split
    -> runs/dev-split/train.jsonl (340 lines), runs/dev-split/val.jsonl (85 lines)
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", type=Path)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    lines = [ln for ln in args.file.read_text(encoding="utf-8").splitlines() if ln.strip()]
    args.out.mkdir(parents=True, exist_ok=True)
    val = [ln for i, ln in enumerate(lines) if i % args.every == 0]
    train = [ln for i, ln in enumerate(lines) if i % args.every]
    (args.out / "train.jsonl").write_text("".join(ln + "\n" for ln in train), encoding="utf-8")
    (args.out / "val.jsonl").write_text("".join(ln + "\n" for ln in val), encoding="utf-8")
    print(f"{args.out / 'train.jsonl'}: {len(train)} lines; {args.out / 'val.jsonl'}: {len(val)} lines")


if __name__ == "__main__":
    main()
