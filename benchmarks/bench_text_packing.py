"""Delete-mode text packed by length, against the padded deletion and the padded forward floor, on the CPU;
and the CPU chunk rule for token rows (time per row at several chunk sizes).

The model is a ``BertForSequenceClassification`` of ``BertConfig()``'s defaults (BERT-base: 12 layers,
width 768, 12 heads, vocabulary 30522), ``num_labels=2``, random weights (speed does not depend on them),
seed 0, eval. The input is one sentence of L = 96 tokens: [CLS], 94 word-piece ids (seed 0) grouped
into words of 1 to 3 tokens (the features), [SEP]; no padding. Interleaved repetitions (after a small
warm-up) of:

* ``packed``: ``Explainer().explain(model, ids, Tokens(word_ids=..., special_ids=[101, 102],
  mode="delete"), n_samples=N)``: rows sorted by kept length, every chunk cut to its longest row, at
  the default chunk rule's size;
* ``padded``: the same with every row re-padded to L (``Tokens._pack_rows = False``: the deletion
  before packing), at the same chunk size;
* ``floor``: the model alone on N unperturbed full-length rows (all L tokens attended) in chunks of the
  same size, under ``torch.inference_mode()``: what a padded perturbation cannot beat.

The masks are the default Bernoulli(1/2) over words. Goal: ``packed`` <= 0.7 x ``floor``.

The chunk rule: the CPU rule used to size chunks by input bytes only (16 MiB), which lets a (2, L)
row of ids through 4096 at a time (every row of a call in one chunk); it now also bounds rows x L by
``CPU_CHUNK_TOKENS``. ``per_row_by_chunk`` is the floor's time per row at chunks of 16 and 32 rows (over 64
rows) and 256 rows (over 256: the old rule's chunk for N >= 256), at the new rule's 64 (``floor``, over N rows)
and at the old rule's size for N rows, all N in one chunk (``floor_old_rule``), interleaved with the rest.

    python benchmarks/bench_text_packing.py --threads 1   # results/text_packing_cpu.json (as committed: one
                                                          # torch thread, the 2-core machine being shared)
    python benchmarks/bench_text_packing.py --quick    # a 2-layer model, N = 16: a smoke run
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
import statistics
import warnings
from typing import Any, Callable

import torch

from torchlime.engine import Explainer, Explanation
from torchlime.stages.forward import chunking
from torchlime.text import Tokens

from benchmarks.common import (
    common_args,
    device_arg,
    exit_if_stopped,
    goal,
    header,
    load_average,
    size_defaults,
    smoke_threads,
    summary,
    timed,
    until_stopped,
    write,
)

L, CLS, SEP, PAD = 96, 101, 102, 0
SWEEP = (16, 32, 256)  # other chunk sizes timed for the rule, each over max(SWEEP_ROWS, size) rows
SWEEP_ROWS = 64
CHECK_SAMPLES = 32


class PaddedTokens(Tokens):
    """``Tokens`` deleting at full length: every row re-padded to L (the path before packing)."""

    _pack_rows = False


def bert(quick: bool, device: torch.device) -> torch.nn.Module:
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(num_labels=2)
    if quick:
        cfg = BertConfig(
            num_labels=2, num_hidden_layers=2, hidden_size=128, num_attention_heads=2, intermediate_size=256
        )
    return BertForSequenceClassification(cfg).eval().to(device)


def sentence(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids (1, L) and word ids (1, L): [CLS], 94 ids in words of 1, 2, 1, 3, 1, 2 ... tokens, [SEP]."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 30000, (1, L), generator=g)
    ids[0, 0], ids[0, -1] = CLS, SEP
    sizes, words, w = [1, 2, 1, 3, 1, 2], [-1], 0
    while len(words) < L - 1:
        words += [w] * sizes[w % len(sizes)]
        w += 1
    words = words[: L - 1] + [-1]
    return ids.to(device), torch.tensor([words], device=device)


def run(model, ids, word_ids, modality: type[Tokens], n: int, seed: int, batch_size: int | None = None) -> Explanation:
    tokens = modality(word_ids=word_ids, special_ids=[CLS, SEP], mode="delete", pad_id=PAD, model_inputs="keywords")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # random weights: "outputs barely vary" is expected
        return Explainer(batch_size=batch_size).explain(
            model, ids, tokens, n_samples=n, generator=seed, return_samples=True
        )


def floor(model, rows: torch.Tensor, chunk: int) -> Callable[[], None]:
    """The model on ``rows`` (c, L) full-length rows in chunks of ``chunk``."""
    mask = torch.ones_like(rows)

    def go() -> None:
        with torch.inference_mode():
            for s in range(0, rows.shape[0], chunk):
                model(input_ids=rows[s : s + chunk], attention_mask=mask[s : s + chunk])

    return go


class Widths(torch.nn.Module):
    """Records the (rows, columns) of every chunk the model gets."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model, self.seen = model, []

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        self.seen.append(tuple(input_ids.shape))
        return self.model(input_ids=input_ids, attention_mask=attention_mask)


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--n-samples", type=int, default=None, help="N (default 100, quick 16)")
    parser.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 3, quick 1)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's; quick 1)")
    args = size_defaults(parser.parse_args(), dict(n_samples=(16, 100), reps=(1, 3)))
    device = device_arg(args.device)
    smoke_threads(args, device)
    n = args.n_samples
    model = bert(args.quick, device)
    ids, word_ids = sentence(device)
    signature = ((2, L), str(torch.long), False, False)
    rule = chunking.cpu_rule(signature)
    old_rule = chunking._pow2_floor(
        min(chunking.MAX_CHUNK, max(1, chunking.CPU_CHUNK_BYTES // chunking.row_bytes(signature)))
    )
    sweep = [s for s in SWEEP if not args.quick or s <= 32]  # a smoke run: small chunks only
    sweep_rows = SWEEP_ROWS if not args.quick else 32
    rows = ids.repeat(max(sweep_rows, n, *sweep), 1)

    record: dict[str, Any] = {}
    times: dict[str, list[float]] = {}
    loads: list[Any] = []
    check: dict[str, Any] = {}
    with until_stopped(record):
        # warm-up (allocations, lazy imports) and the checks: the same masks, packed and padded
        rec = Widths(model)
        m = min(n, CHECK_SAMPLES)
        packed = run(rec, ids, word_ids, Tokens, m, 0, batch_size=8)  # chunks of 8: several, cut
        padded = run(model, ids, word_ids, PaddedTokens, m, 0, batch_size=8)
        kept = packed.samples.float().mean().item()
        check = dict(
            n_samples=m,
            same_masks=bool(torch.equal(packed.samples, padded.samples)),
            max_abs_output_difference=float((packed.outputs - padded.outputs).abs().max()),
            max_abs_coef_difference=float((packed.coef - padded.coef).abs().max()),
            chunk_size=int(packed.meta["batch_size"]),
            rule_chunk_size=rule,
            chunks=[list(s) for s in rec.seen],
            mean_columns_per_row=sum(r * w for r, w in rec.seen) / sum(r for r, _ in rec.seen),
            mean_words_kept=kept,
        )
        floor(model, rows[:8], 8)()
        systems: dict[str, Callable[[int], Any]] = {
            "packed": lambda s: run(model, ids, word_ids, Tokens, n, s),
            "padded": lambda s: run(model, ids, word_ids, PaddedTokens, n, s),
            "floor": lambda s: floor(model, rows[:n], rule)(),
        }
        systems["floor_old_rule"] = lambda s: floor(model, rows[:n], min(old_rule, n))()
        for size in (s for s in sweep if s != rule):  # the rule's size: the floor itself, over N rows
            systems[f"floor_chunk_{size}"] = lambda s, size=size: floor(model, rows[: max(sweep_rows, size)], size)()
        times.update({k: [] for k in systems})
        for rep in range(args.reps):
            loads.append(load_average())
            for name, fn in systems.items():
                times[name].append(timed(lambda fn=fn, s=rep + 1: fn(s), device))
                print(f"rep {rep} {name}: {times[name][-1]:.1f} s", flush=True)
        loads.append(load_average())

    done = record.get("stopped_early") is None
    med = {k: statistics.median(v) for k, v in times.items() if v}
    ratios: dict[str, Any] = {}
    if done:
        # ratios of the medians, and the median of each repetition's own ratio (its systems ran back to back,
        # under the same load: on a shared machine the load changes between repetitions more than within one)
        for a, b in (("packed", "floor"), ("padded", "floor"), ("packed", "padded")):
            paired = [x / y for x, y in zip(times[a], times[b])]
            ratios[f"{a}_over_{b}"] = med[a] / med[b]
            ratios[f"{a}_over_{b}_per_rep"] = paired
            ratios[f"{a}_over_{b}_paired_median"] = statistics.median(paired)
    per_row = {
        size: med[f"floor_chunk_{size}"] / max(sweep_rows, size) for size in sweep if f"floor_chunk_{size}" in med
    }
    if "floor" in med:
        per_row[rule] = med["floor"] / n
    if "floor_old_rule" in med:
        per_row[min(old_rule, n)] = med["floor_old_rule"] / n
    per_row = dict(sorted(per_row.items()))
    result = dict(
        header(device),
        threads=torch.get_num_threads(),
        load_average=load_average(),
        load_average_per_rep=loads,
        quick=args.quick,
        setup=dict(
            model="BertForSequenceClassification(BertConfig(num_labels=2)): BERT-base defaults, random weights, "
            "seed 0, eval"
            if not args.quick
            else "a 2-layer BERT of width 128 (smoke run)",
            sequence_length=L,
            n_features=int(packed.n_features[0]) if check else None,
            n_samples=n,
            reps=args.reps,
            sampler="Bernoulli(1/2) over words (the default)",
            call="Explainer().explain(model, ids, Tokens(word_ids=..., special_ids=[101, 102], mode='delete', "
            "pad_id=0, model_inputs='keywords'), n_samples=N, generator=rep, return_samples=True)",
            padded="the same with Tokens._pack_rows = False (every row re-padded to L)",
            floor=f"model(input_ids, attention_mask) on N full-length rows in chunks of {rule}, inference_mode",
            chunk_rule=dict(
                old=f"pow2 <= min(MAX_CHUNK, CPU_CHUNK_BYTES // row bytes) = {old_rule} rows (all N in one chunk)",
                new=f"also rows <= CPU_CHUNK_TOKENS // L = {chunking.CPU_CHUNK_TOKENS} // {L}: {rule} rows",
                per_row_timing=f"the floor over max({sweep_rows}, size) rows at {list(sweep)}, over N rows at the "
                "rules' sizes",
            ),
        ),
        check=check,
        systems={k: summary(v) for k, v in times.items() if v},
        ratios=ratios,
        goal=goal(
            "packed delete <= 0.7 x the padded forward floor (median of the repetitions' paired ratios)",
            ratios.get("packed_over_floor_paired_median"),
            0.7,
            quick=args.quick,
        ),
        per_row_by_chunk=per_row,
        chunk_rule=dict(
            old_rule_chunk=old_rule,
            new_rule_chunk=rule,
            old_rule_chunk_at_this_n=min(old_rule, n),
            per_row_at_new_rule=per_row.get(rule),
            per_row_at_old_rule_chunk_at_this_n=per_row.get(min(old_rule, n)),
            old_over_new_per_row=(
                per_row[min(old_rule, n)] / per_row[rule] if min(old_rule, n) in per_row and rule in per_row else None
            ),
            per_row_at_largest_measured=per_row.get(max(per_row)) if per_row else None,
            # per repetition: the time per row at the old rule's chunk for N rows, and at 256 rows, over the new rule's
            old_over_new_per_row_per_rep=[
                o / f for o, f in zip(times.get("floor_old_rule", []), times.get("floor", []))
            ],
            chunk_256_over_new_per_row_per_rep=[
                (c / max(sweep_rows, 256)) / (f / n)
                for c, f in zip(times.get("floor_chunk_256", []), times.get("floor", []))
            ],
        ),
        stopped_early=record.get("stopped_early"),
    )
    path = write(f"text_packing_{device.type}{'_quick' if args.quick else ''}.json", result, args.out)
    print(f"wrote {path}")
    for k, v in ratios.items():
        print(f"{k}: {v if isinstance(v, list) else round(v, 3)}")
    exit_if_stopped(record)


if __name__ == "__main__":
    main()
