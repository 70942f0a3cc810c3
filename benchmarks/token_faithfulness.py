"""Are token explanations faithful? The LIME paper's gold-feature recall, on token ids.

    python benchmarks/token_faithfulness.py                          # a few minutes on 2 CPU cores
    python benchmarks/token_faithfulness.py --quick --out /tmp/q     # smoke run: 6 inputs, N=300

The protocol of the LIME paper's faithfulness experiment (Ribeiro et al. 2016, section 5.2),
as in ``tabular_faithfulness.py``, for ``torchlime.text.explain_tokens``: classifiers that use
at most 10 words *by construction*, and the recall of each input's gold words among the 10
top-ranked features of its explanation, averaged over held-out inputs. The paper reports
> 90 % for LIME on its review texts.

* Data: the synthetic sentences of ``torchlime.demo.text_data.make_text_dataset`` (8-20 neutral
  filler words and 1-3 sentiment phrases, "not" flipping the next word); the classifiers are
  trained on ``--n-train`` sentences (seed 0) and explain held-out sentences (seed 1).
* Features of the classifiers: a bag of words, the count of every vocabulary id in the
  sentence; padding and the special ids ([PAD], [UNK], [CLS], [SEP], [MASK]) count nothing.
* Models: an L1 logistic regression (liblinear, the largest C of a logarithmic grid that keeps
  at most 10 non-zero weights; gold: the words with a non-zero weight that occur in the input)
  and a decision tree with ``max_depth=10`` (a path tests at most 10 words; gold: the distinct
  words tested on the input's decision path that occur in the input: a word tested but absent
  is no token of the input, so no token explanation can point at it). Inputs without a gold
  word are skipped: the held-out sentences are scanned in order until ``--n-test`` inputs with
  at least one gold word are found; the JSON says how many were skipped on the way.
* Explainers: ``explain_tokens(preset="lime")`` (``LimeTextExplainer``'s settings: remove
  k ~ U{1..D} tokens, cosine distance x 100 with kernel width 25, N = 5000, Ridge(1)) for the
  predicted class, with hidden tokens replaced by [MASK] (an id the classifiers ignore, so
  this equals deleting them); the same with the paper's K-Lasso (``surrogate=KLasso(k=10)``);
  lime's own ``LimeTextExplainer`` (the tokens joined by spaces, split on whitespace,
  num_features=10) on the first ``--lime-inputs`` inputs, with torchlime's figure on those
  same inputs beside it; and random rankings (a random top 10 of the input's tokens, and the
  exact expectation of that recall). A stricter figure beside the recall: the recall among an
  input's top g features, g = its number of gold tokens (all of them first, or not).
* Recall: every token is a feature, so a feature is the word it is; an input's top 10
  features give a set of words and recall = |gold words in that set| / |gold words|. A word
  occurring twice is one gold word, found when either of its tokens is in the top 10. lime
  (``bow=True``) has one feature per distinct word, so its top 10 are 10 distinct words.

The models are the scikit-learn classifiers wrapped as torch callables: token ids (rows, L)
in, bag-of-words counts built with ``scatter_add``, probabilities (rows, 2) out. Results:
results/token_faithfulness.json (CPU; other devices add ``_<device>``, smoke runs
``_quick``); benchmarks/TABULAR.md reports them.
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import math
import time

import numpy as np
import torch

from torchlime import KLasso
from torchlime.demo.text_data import CLS, MASK, PAD, SEP, SPECIALS, VOCAB, make_text_dataset
from torchlime.text import explain_tokens

from benchmarks.common import common_args, device_arg, header, optional_module, size_defaults, write
from benchmarks.faithfulness_lib import MAX_GOLD, decision_tree_fit, sparse_logreg_fit, summary

TOP_K = 10

V = len(VOCAB)
IGNORED = torch.arange(len(SPECIALS))  # pad and special ids: no column of the bag of words counts them
INDEX = {w: i for i, w in enumerate(VOCAB)}


def bag_of_words(ids: torch.Tensor) -> torch.Tensor:
    """Float64 (rows, V) counts of every vocabulary id in each row of ``ids`` (rows, L); the
    special and pad ids (and [MASK], which hidden tokens become) count nothing.
    """
    counts = torch.zeros(ids.shape[0], V, dtype=torch.float64, device=ids.device)
    counts.scatter_add_(1, ids.long(), torch.ones(ids.shape, dtype=torch.float64, device=ids.device))
    counts[:, IGNORED.to(ids.device)] = 0
    return counts


class SklearnTokenModel:
    """A scikit-learn classifier on bags of words as a torch callable:
    ``(input_ids (rows, L), attention_mask) -> (rows, 2)`` float64 probabilities.
    """

    def __init__(self, clf) -> None:
        self.clf = clf

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        ids = input_ids if attention_mask is None else input_ids.masked_fill(attention_mask == 0, PAD)
        proba = self.clf.predict_proba(bag_of_words(ids).cpu().numpy())
        return torch.from_numpy(proba).to(input_ids.device)


def sparse_logreg(x: np.ndarray, y: np.ndarray):
    """The L1 logistic regression with the largest C of a grid using <= 10 words; (model, gold fn, text)."""
    clf, _, used, c = sparse_logreg_fit(x, y)
    used_mask = np.zeros(V, dtype=bool)
    used_mask[used] = True
    order = used[np.argsort(-np.abs(clf.coef_[0][used]))]
    clf.gold_weights = [dict(word=VOCAB[i], weight=round(float(clf.coef_[0][i]), 4)) for i in order]

    def gold(counts: np.ndarray) -> np.ndarray:
        return used_mask[None] & (counts > 0)

    return clf, gold, f"L1 logistic regression, C={c:.3g}, {len(used)} words"


def decision_tree(x: np.ndarray, y: np.ndarray, seed: int):
    """A decision tree of depth <= 10; gold: the distinct words tested on each input's decision
    path that occur in the input.
    """
    clf, tested = decision_tree_fit(x, y, seed)
    return (
        clf,
        (lambda counts: tested(counts) & (counts > 0)),
        f"decision tree, depth {clf.get_depth()} (max_depth={MAX_GOLD})",
    )


def word_sets(words: np.ndarray) -> np.ndarray:
    """Bool (n, V) masks of the words in ``words`` (n, k) vocabulary ids (-1: none)."""
    out = np.zeros((len(words), V + 1), dtype=bool)
    np.put_along_axis(out, np.where(words < 0, V, words), True, 1)
    return out[:, :V]


def recall(top_words: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Per input: |gold words among the top words| / |gold words|; top_words (n, k) ids, -1 = none."""
    return (word_sets(top_words) & gold).sum(1) / gold.sum(1)


def feature_words(exp, ids: torch.Tensor) -> torch.Tensor:
    """Long (B, F) the vocabulary id of every feature of a token explanation (-1: padded feature)."""
    feats = exp.features
    out = torch.full((ids.shape[0], int(exp.coef.shape[-1]) + 1), -1, dtype=torch.long)
    out.scatter_(1, torch.where(feats >= 0, feats, out.shape[1] - 1), ids.long())
    return out[:, :-1]


def top_words(exp, ids: torch.Tensor, k: int = TOP_K) -> np.ndarray:
    """(B, k) the words of each input's k features of largest |coefficient| (-1: none)."""
    idx = exp.top_features(k, by="abs")[0][:, 0]
    words = feature_words(exp, ids).gather(1, idx)
    valid = exp.valid.gather(1, idx)
    return torch.where(valid, words, -1).numpy()


def top_gold_tokens(exp, ids: torch.Tensor, n_gold_tokens: np.ndarray) -> np.ndarray:
    """(B, g_max) the words of each input's g features of largest |coefficient|, g = its number
    of gold tokens (-1 beyond g): a ranking that puts every gold token first recalls them all.
    """
    words = top_words(exp, ids, int(n_gold_tokens.max()))
    return np.where(np.arange(words.shape[1]) < n_gold_tokens[:, None], words, -1)


def random_top(ids: torch.Tensor, features: torch.Tensor, rng: np.random.Generator) -> np.ndarray:
    """(B, 10) the words of 10 random tokens of each input (all of them when it has fewer)."""
    out = np.full((len(ids), TOP_K), -1)
    for i in range(len(ids)):
        tokens = ids[i][features[i] >= 0].numpy()
        pick = rng.permutation(len(tokens))[:TOP_K]
        out[i, : len(pick)] = tokens[pick]
    return out


def random_expected(counts: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Per input: the expected recall of a random top 10 of its T tokens: a gold word with m
    tokens is missed with probability C(T - m, 10) / C(T, 10).
    """
    out = np.empty(len(counts))
    for i, (c, g) in enumerate(zip(counts, gold)):
        t = int(c.sum())
        hit = [1.0 - math.comb(t - int(m), TOP_K) / math.comb(t, TOP_K) if t > TOP_K else 1.0 for m in c[g]]
        out[i] = float(np.mean(hit))
    return out


def lime_top(
    lime_text, strings: list[str], model: SklearnTokenModel, length: int, n_samples: int, seed: int, labels: list[int]
) -> np.ndarray:
    """Lime's own top-10 words (``LimeTextExplainer``, whitespace split, bow=True, num_features=10)."""

    def classifier_fn(texts: list[str]) -> np.ndarray:
        ids = torch.full((len(texts), length), PAD, dtype=torch.long)
        for i, text in enumerate(texts):
            row = [INDEX[w] for w in text.split() if w in INDEX]
            if row:
                ids[i, : len(row)] = torch.tensor(row)
        return model(ids).numpy()

    explainer = lime_text.LimeTextExplainer(split_expression=r"\s+", bow=True, random_state=seed)
    out = np.full((len(strings), TOP_K), -1)
    for i, (text, label) in enumerate(zip(strings, labels)):
        exp = explainer.explain_instance(
            text, classifier_fn, labels=(label,), num_features=TOP_K, num_samples=n_samples
        )
        ranked = sorted(exp.local_exp[label], key=lambda fw: -abs(fw[1]))[:TOP_K]
        words = [INDEX[exp.domain_mapper.indexed_string.word(f)] for f, _ in ranked]
        out[i, : len(words)] = words
    return out


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--n-train", type=int, default=None, help="training sentences; default 5000, quick 1000")
    parser.add_argument(
        "--n-pool",
        type=int,
        default=None,
        help="held-out sentences scanned for inputs with gold words; default 2000, quick 200",
    )
    parser.add_argument("--n-test", type=int, default=None, help="explained inputs per model; default 150, quick 6")
    parser.add_argument("--n-samples", type=int, default=None, help="samples per input; default 5000, quick 300")
    parser.add_argument("--lime-inputs", type=int, default=None, help="inputs lime explains; default 20, quick 2")
    parser.add_argument(
        "--batch-size",
        type=int,
        default=5000,
        help="rows per model call (scikit-learn's per-call overhead favours large chunks)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    size_defaults(
        args,
        dict(n_train=(1000, 5000), n_pool=(200, 2000), n_test=(6, 150), n_samples=(300, 5000), lime_inputs=(2, 20)),
    )
    device = device_arg(args.device)
    torch.set_num_threads(args.threads)
    lime_text, lime_missing = optional_module("lime.lime_text")
    rng = np.random.default_rng(args.seed)
    t_start = time.perf_counter()
    train = make_text_dataset(args.n_train, seed=args.seed)
    pool = make_text_dataset(args.n_pool, seed=args.seed + 1)
    length = pool.input_ids.shape[1]
    x_tr = bag_of_words(train.input_ids).numpy()
    x_pool = bag_of_words(pool.input_ids).numpy()
    content = IGNORED.numel()  # vocabulary ids that are words: [len(SPECIALS), V)
    results = []
    for fitted in (sparse_logreg(x_tr, train.labels.numpy()), decision_tree(x_tr, train.labels.numpy(), args.seed)):
        clf, gold_of, description = fitted
        gold_pool = gold_of(x_pool)
        has_gold = np.flatnonzero(gold_pool.any(1))
        chosen = has_gold[: args.n_test]
        scanned = int(chosen[-1]) + 1
        gold, counts = gold_pool[chosen], x_pool[chosen]
        n_gold_tokens = (counts * gold).sum(1).astype(int)
        ids = pool.input_ids[chosen]
        attn = pool.attention_mask[chosen]
        model = SklearnTokenModel(clf)
        row = dict(
            dataset="make_text_dataset",
            vocabulary=V - content,
            n_train=args.n_train,
            model=description.split(",")[0],
            description=description,
            accuracy=float(clf.score(x_pool, pool.labels.numpy())),
            scanned=scanned,
            skipped=scanned - len(chosen),
            skipped_fraction_pool=float(1 - len(has_gold) / len(x_pool)),
            tokens_mean=float(counts.sum(1).mean()),
            gold_mean=float(gold.sum(1).mean()),
            gold_max=int(gold.sum(1).max()),
            gold_tokens_mean=float(n_gold_tokens.mean()),
            gold_weights=getattr(clf, "gold_weights", None),
        )
        tops = {}
        features = None
        settings = dict(
            attention_mask=attn.to(device),
            special_ids=[CLS, SEP],
            mode="replace",
            mask_id=MASK,
            pad_id=PAD,
            preset="lime",
            n_samples=args.n_samples,
            generator=args.seed,
            batch_size=args.batch_size,
        )
        for method, extra in (("torchlime_ridge", {}), ("torchlime_klasso", dict(surrogate=KLasso(k=TOP_K)))):
            t0 = time.perf_counter()
            exp = explain_tokens(model, ids.to(device), **settings, **extra)
            exp = exp.to("cpu")
            top = top_words(exp, ids)
            row[method] = dict(
                summary(recall(top, gold)),
                seconds=time.perf_counter() - t0,
                r2_median=float(exp.score[:, 0].median()),
                top_gold_tokens=summary(recall(top_gold_tokens(exp, ids, n_gold_tokens), gold)),
            )
            tops[method] = top
            features = exp.features
        row["random"] = summary(recall(random_top(ids, features, rng), gold))
        row["random_expected"] = float(random_expected(counts, gold).mean())
        if lime_text is not None and args.lime_inputs > 0:
            t0 = time.perf_counter()
            m = min(args.lime_inputs, len(chosen))
            strings = [" ".join(VOCAB[i] for i in r[(f >= 0)].tolist()) for r, f in zip(ids[:m], features[:m])]
            labels = model(ids[:m], attn[:m]).argmax(1).tolist()
            top = lime_top(lime_text, strings, model, length, args.n_samples, args.seed, labels)
            row["lime"] = dict(summary(recall(top, gold[:m])), seconds=time.perf_counter() - t0)
            # torchlime on the same inputs (each input's samples depend on its index only)
            row["torchlime_ridge_same_inputs"] = summary(recall(tops["torchlime_ridge"][:m], gold[:m]))
        results.append(row)
        print(
            f"{row['model']:24s} gold {row['gold_mean']:4.2f}  skipped {row['skipped']:4d}  ridge "
            f"{row['torchlime_ridge']['mean']:.3f}  klasso {row['torchlime_klasso']['mean']:.3f}  "
            f"lime {row.get('lime', {}).get('mean', float('nan')):.3f}  random {row['random']['mean']:.3f} "
            f"(expected {row['random_expected']:.3f})"
        )
    payload = dict(
        header(device),
        benchmark="token_faithfulness",
        quick=args.quick,
        top_k=TOP_K,
        max_gold=MAX_GOLD,
        n_samples=args.n_samples,
        n_train=args.n_train,
        n_pool=args.n_pool,
        n_test=args.n_test,
        lime_inputs=args.lime_inputs,
        batch_size=args.batch_size,
        seed=args.seed,
        mode="replace",
        threads=torch.get_num_threads(),
        lime=None if lime_text is None else "lime.lime_text",
        lime_missing=lime_missing,
        seconds_total=time.perf_counter() - t_start,
        results=results,
        note="smoke run: proves the script runs, not a measurement" if args.quick else "",
    )
    stem = "token_faithfulness" + ("" if device.type == "cpu" else f"_{device.type}")
    print("wrote", write(stem + ("_quick" if args.quick else "") + ".json", payload, args.out))


if __name__ == "__main__":
    main()
