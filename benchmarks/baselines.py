"""Baseline learning curves for the switch task (docs/design.md section 4 table).

Usage (from the repo root):

    python3 benchmarks/baselines.py --train ../shared/data/switch-dev-train.jsonl \
        --test ../shared/data/switch-dev-test.jsonl [--orders 5] [--json OUT]
        [--order-scheme spec|pyrandom] [--keyword-both NOOP|OFF]
        [--nb-alpha A] [--lr-class-weight balanced|none]

Baselines:
  * keyword  -- lower-cased words ([a-z0-9']+); "on" present -> ON, "off" present -> OFF,
                both or neither -> NOOP (--keyword-both OFF: "off" wins when both occur).
                Needs no training (flat curve).
  * nb       -- CountVectorizer(word 1-2 grams) + MultinomialNB(alpha=0.1; --nb-alpha).
  * svm      -- the same features as lr, LinearSVC(C=1.0, class_weight="balanced").
  * char nb  -- CountVectorizer(char_wb 2-5) + CountVectorizer(words), hstacked,
                MultinomialNB(alpha=0.1, fit_prior=False) fitted with class-balanced
                sample weights (each class weighs the same in the counts).
  * lr       -- TfidfVectorizer(word 1-2) + TfidfVectorizer(char_wb 2-5), hstacked,
                LogisticRegression(default C=1.0, max_iter=10000,
                class_weight="balanced"; --lr-class-weight none for unweighted).

If the training prefix contains only one class the scikit-learn learners cannot
be fitted; they then predict that class for every test text.

Scores are balanced accuracy (mean recall over the classes present in the test
file), averaged over the training orders.  --order-scheme spec (default) uses
curves.train_orders (order 0 = file order, order i = numpy.random.default_rng(i)
.permutation(n)); --order-scheme pyrandom uses curves.pyrandom_orders
(random.Random(i).shuffle, i = 0..k-1), the scheme docs/design.md's table was made with.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from curves import ORDER_SCHEMES, budgets_for, learning_curve, load_jsonl  # noqa: E402

WORD_RE = re.compile(r"[a-z0-9']+")
DEFAULT_BUDGETS = (10, 20, 50, 100, 200, None)


def keyword_label(text: str, both: str = "NOOP") -> str:
    """Keyword rule; ``both`` is the label when "on" and "off" both occur."""
    words = set(WORD_RE.findall(text.lower()))
    on, off = "on" in words, "off" in words
    if on and off:
        return both
    if on:
        return "ON"
    if off:
        return "OFF"
    return "NOOP"


def keyword_fit_predict(train_rows, test_texts, both: str = "NOOP"):
    return [keyword_label(t, both) for t in test_texts]


def _single_class(train_rows):
    labels = {r["label"] for r in train_rows}
    if len(labels) == 1:
        return next(iter(labels))
    if not labels:
        raise ValueError("empty training prefix")
    return None


def nb_fit_predict(train_rows, test_texts, alpha: float = 0.1):
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.naive_bayes import MultinomialNB

    only = _single_class(train_rows)
    if only is not None:
        return [only] * len(test_texts)
    vec = CountVectorizer(ngram_range=(1, 2))
    X = vec.fit_transform([r["text"] for r in train_rows])
    clf = MultinomialNB(alpha=alpha).fit(X, [r["label"] for r in train_rows])
    return list(clf.predict(vec.transform(test_texts)))


def lr_fit_predict(train_rows, test_texts, class_weight="balanced", C: float = 1.0):
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    only = _single_class(train_rows)
    if only is not None:
        return [only] * len(test_texts)
    texts = [r["text"] for r in train_rows]
    wv = TfidfVectorizer(analyzer="word", ngram_range=(1, 2))
    cv = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5))
    X = hstack([wv.fit_transform(texts), cv.fit_transform(texts)]).tocsr()
    clf = LogisticRegression(C=C, max_iter=10000, class_weight=class_weight)
    clf.fit(X, [r["label"] for r in train_rows])
    Xt = hstack([wv.transform(test_texts), cv.transform(test_texts)]).tocsr()
    return list(clf.predict(Xt))


def _word_char_tfidf():
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(analyzer="word", ngram_range=(1, 2)), TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5))


def svm_fit_predict(train_rows, test_texts, C: float = 1.0):
    from scipy.sparse import hstack
    from sklearn.svm import LinearSVC

    only = _single_class(train_rows)
    if only is not None:
        return [only] * len(test_texts)
    texts = [r["text"] for r in train_rows]
    wv, cv = _word_char_tfidf()
    X = hstack([wv.fit_transform(texts), cv.fit_transform(texts)]).tocsr()
    clf = LinearSVC(C=C, class_weight="balanced").fit(X, [r["label"] for r in train_rows])
    return list(clf.predict(hstack([wv.transform(test_texts), cv.transform(test_texts)]).tocsr()))


def char_nb_fit_predict(train_rows, test_texts, alpha: float = 0.1):
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.naive_bayes import MultinomialNB
    from sklearn.utils.class_weight import compute_sample_weight

    only = _single_class(train_rows)
    if only is not None:
        return [only] * len(test_texts)
    texts, labels = [r["text"] for r in train_rows], [r["label"] for r in train_rows]
    wv, cv = CountVectorizer(analyzer="word"), CountVectorizer(analyzer="char_wb", ngram_range=(2, 5))
    X = hstack([wv.fit_transform(texts), cv.fit_transform(texts)]).tocsr()
    clf = MultinomialNB(alpha=alpha, fit_prior=False).fit(X, labels, sample_weight=compute_sample_weight("balanced", labels))
    return list(clf.predict(hstack([wv.transform(test_texts), cv.transform(test_texts)]).tocsr()))


BASELINES = {
    "keyword rule": keyword_fit_predict,
    "naive Bayes, word 1-2 grams": nb_fit_predict,
    "logistic regression, word + char n-grams": lr_fit_predict,
    "linear SVM, word + char n-grams": svm_fit_predict,
    "naive Bayes, char_wb 2-5 + words, balanced": char_nb_fit_predict,
}


def make_baselines(keyword_both="NOOP", nb_alpha=0.1, lr_class_weight="balanced"):
    return {
        "keyword rule": lambda tr, te: keyword_fit_predict(tr, te, keyword_both),
        "naive Bayes, word 1-2 grams": lambda tr, te: nb_fit_predict(tr, te, nb_alpha),
        "logistic regression, word + char n-grams": lambda tr, te: lr_fit_predict(tr, te, lr_class_weight),
        "linear SVM, word + char n-grams": svm_fit_predict,
        "naive Bayes, char_wb 2-5 + words, balanced": char_nb_fit_predict,
    }


def run(train, test, orders=5, budgets=DEFAULT_BUDGETS, baselines=None):
    baselines = baselines or BASELINES
    return {name: learning_curve(fn, train, test, budgets, orders) for name, fn in baselines.items()}


def markdown_table(results, n_train, budgets=DEFAULT_BUDGETS) -> str:
    cols = [lab for lab, _ in budgets_for(n_train, budgets)]
    lines = ["| n | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for name, curve in results.items():
        cells = [f"{curve[c]['mean']:.3f}".lstrip("0") for c in cols]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--orders", type=int, default=5)
    ap.add_argument("--json", dest="json_out", help="also write results as JSON here")
    ap.add_argument("--order-scheme", choices=sorted(ORDER_SCHEMES), default="spec",
                    help="spec: order 0 = file order, order i = default_rng(i).permutation; "
                         "pyrandom: random.Random(i).shuffle, i=0..k-1 (docs/design.md's table)")
    ap.add_argument("--keyword-both", choices=["NOOP", "OFF"], default="NOOP",
                    help="keyword rule label when both 'on' and 'off' occur")
    ap.add_argument("--nb-alpha", type=float, default=0.1, help="MultinomialNB smoothing")
    ap.add_argument("--lr-class-weight", choices=["balanced", "none"], default="balanced")
    args = ap.parse_args(argv)

    train, test = load_jsonl(args.train), load_jsonl(args.test)
    for name, rows in (("train", train), ("test", test)):
        missing = sum("label" not in r for r in rows)
        if missing:
            ap.error(f"{name} file has {missing} rows without 'label'")
    orders = ORDER_SCHEMES[args.order_scheme](len(train), args.orders)
    baselines = make_baselines(args.keyword_both, args.nb_alpha,
                               None if args.lr_class_weight == "none" else "balanced")
    results = run(train, test, orders, baselines=baselines)
    print(f"balanced accuracy, mean of {args.orders} orders ({args.order_scheme}); "
          f"train={args.train} ({len(train)} rows) test={args.test} ({len(test)} rows)\n")
    print(markdown_table(results, len(train)))
    if args.json_out:
        payload = {
            "train": args.train, "test": args.test, "n_train": len(train), "n_test": len(test),
            "orders": args.orders,
            "order_scheme": args.order_scheme,
            "settings": {"keyword_both": args.keyword_both, "nb_alpha": args.nb_alpha,
                         "lr_class_weight": args.lr_class_weight},
            "metric": "balanced_accuracy", "baselines": results,
        }
        Path(args.json_out).write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
