"""Text explanations per second on a BERT-base-sized classifier, and the ratio to its forward-pass floor.

A transformer classifier is built from a config with random weights (speed
does not depend on them): ``transformers.BertForSequenceClassification`` of
BERT-base size when transformers is installed, else a pure-torch encoder of the
same size. B inputs of L = 128 tokens are explained with ``explain_tokens``
(lime's text preset, N = 5000 samples each) at the chunk size torchlime measures (or
``--chunk``); the floor is the bare chunked forward pass of the same B·N rows (prebuilt, on
the device) under ``inference_mode`` at the fastest of a few chunk sizes (torchlime's among
them). Reported: median seconds, explanations per second, explain / floor and the peak CUDA
memory of each mode's call.

    python benchmarks/bench_text_gpu.py                      # CUDA, BERT-base, bf16, N=5000
    python benchmarks/bench_text_gpu.py --modes replace delete infill
    python benchmarks/bench_text_gpu.py --device cpu --quick --out /tmp/quick   # tiny config: proves it runs
"""

from __future__ import annotations

import sys as _sys
from pathlib import Path as _Path

if __package__ in (None, ""):  # run as a script (python benchmarks/NAME.py): the repository root on the path
    _sys.path.insert(0, str(_Path(__file__).resolve().parents[1]))

import argparse
from typing import Any, Callable

import torch
from torch import nn

from torchlime.text import explain_tokens
from torchlime.text.infill import Infiller

from benchmarks.common import (
    best_chunk,
    common_args,
    device_arg,
    header,
    size_defaults,
    smoke_threads,
    summary,
    timed,
    warm_up,
    write,
)

PAD, CLS, SEP, MASK = 0, 101, 102, 103  # BERT uncased ids
BASE = dict(
    vocab_size=30522,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=512,
)
TINY = dict(
    vocab_size=30522,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=512,
)


class TorchEncoder(nn.Module):
    """Pure-torch BERT-like encoder (used when transformers is missing): ids + mask -> logits or MLM logits."""

    def __init__(self, cfg: dict, n_labels: int = 2, mlm: bool = False) -> None:
        super().__init__()
        d = cfg["hidden_size"]
        self.tok = nn.Embedding(cfg["vocab_size"], d)
        self.pos = nn.Embedding(cfg["max_position_embeddings"], d)
        layer = nn.TransformerEncoderLayer(
            d,
            cfg["num_attention_heads"],
            cfg["intermediate_size"],
            activation="gelu",
            batch_first=True,
            norm_first=False,
        )
        self.encoder = nn.TransformerEncoder(layer, cfg["num_hidden_layers"], enable_nested_tensor=False)
        self.head = nn.Linear(d, cfg["vocab_size"] if mlm else n_labels)
        self.mlm = mlm

    def get_input_embeddings(self) -> nn.Embedding:
        return self.tok

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        h = self.encoder(self.tok(input_ids) + self.pos(pos), src_key_padding_mask=attention_mask == 0)
        return self.head(h if self.mlm else h[:, 0])


def build(cfg: dict, mlm: bool, device: torch.device, dtype: torch.dtype) -> tuple[nn.Module, str]:
    """A classifier (or MLM) from a config, random weights, eval mode; and which implementation."""
    torch.manual_seed(0)
    try:
        import transformers

        conf = transformers.BertConfig(**cfg, num_labels=2)
        cls = transformers.BertForMaskedLM if mlm else transformers.BertForSequenceClassification
        model, impl = cls(conf), f"transformers {transformers.__version__} Bert"
    except ImportError:
        model, impl = TorchEncoder(cfg, mlm=mlm), "pure-torch TransformerEncoder"
    return model.to(device=device, dtype=dtype).eval(), impl


def inputs(batch: int, length: int, vocab: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, vocab, (batch, length), generator=g)
    ids[:, 0], ids[:, -1] = CLS, SEP
    return ids.to(device), torch.ones_like(ids).to(device)


def floor_fn(
    model: nn.Module, ids: torch.Tensor, attn: torch.Tensor, n: int, chunk: int, rows: int | None = None
) -> Callable[[], None]:
    """The bare forward pass of B·N rows (the inputs repeated, built beforehand) in chunks
    (the first ``rows`` of them when given).
    """
    total = ids.shape[0] * n if rows is None else rows
    all_ids = ids.repeat_interleave(n, 0)[:total]
    mask = attn.repeat_interleave(n, 0)[:total]

    def run() -> None:
        with torch.inference_mode():
            for i in range(0, total, chunk):
                model(input_ids=all_ids[i : i + chunk], attention_mask=mask[i : i + chunk])  # timed() syncs

    return run


def explain_fn(
    model: nn.Module,
    ids: torch.Tensor,
    attn: torch.Tensor,
    n: int,
    chunk: int | None,
    mode: str,
    mlm: Any,
    store: dict | None = None,
) -> Callable[[], None]:
    store = {} if store is None else store

    def run() -> None:
        infill = Infiller(mlm, mlm_inputs="keywords", synonym_threshold=0.9) if mode == "infill" else None
        exp = explain_tokens(
            model,
            ids,
            attention_mask=attn,
            special_ids=[CLS, SEP],
            mode=mode,
            mask_id=MASK,
            pad_id=PAD,
            model_inputs="keywords",
            preset="lime_text",
            n_samples=n,
            batch_size=chunk,
            infill=infill,
        )
        exp.coef.sum().item()
        store["meta"] = exp.meta

    return run


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]), default_device="cuda")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's; quick on CPU: 1)")
    ap.add_argument("--n", type=int, default=None, help="samples per input (default 5000; quick: 32)")
    ap.add_argument("--batch", type=int, default=None, help="inputs explained together (default 4; quick: 2)")
    ap.add_argument("--length", type=int, default=None, help="tokens per input (default 128; quick: 32)")
    ap.add_argument(
        "--chunk",
        type=int,
        default=None,
        help="rows per model call for torchlime and the floor "
        "(default: torchlime measures its own; the floor takes the fastest of a few)",
    )
    ap.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default=None, help="default: bf16 on CUDA, else fp32")
    ap.add_argument(
        "--modes",
        nargs="+",
        default=None,
        choices=["replace", "delete", "infill"],
        help="default: replace delete; quick: all three",
    )
    ap.add_argument("--reps", type=int, default=None, help="default 3; quick: 1")
    args = ap.parse_args(argv)
    defaults = dict(
        n=(32, 5000),
        batch=(2, 4),
        length=(32, 128),
        reps=(1, 3),
        modes=(["replace", "delete", "infill"], ["replace", "delete"]),
    )
    size_defaults(args, defaults)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device = device_arg(args.device)
    smoke_threads(args, device)
    cfg = TINY if args.quick else BASE
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[
        args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    ]
    model, impl = build(cfg, False, device, dtype)
    mlm = build(cfg, True, device, dtype)[0] if "infill" in args.modes else None
    ids, attn = inputs(args.batch, args.length, cfg["vocab_size"], device)
    stores: dict[str, dict] = {mode: {} for mode in args.modes}
    systems: dict[str, Callable[[], None]] = {}
    chunks = {}
    for mode in args.modes:  # warm-up: kernels, allocator, torchlime's chunk-size measurement
        fn = explain_fn(model, ids, attn, args.n, args.chunk, mode, mlm, stores[mode])
        chunks[mode] = warm_up(fn, stores[mode], least=2, most=4)
        systems[f"explain_{mode}"] = fn
    if args.chunk:
        sizes = [args.chunk]
    else:
        sizes = [16, 64] if args.quick else ([256, 512, 1024, 2048] if device.type == "cuda" else [32, 128, 512])
        sizes = [*sizes, *chunks.values()]
    probe = min(args.batch * args.n, 2 * max(sizes))
    chunk, tried = best_chunk(lambda b: floor_fn(model, ids, attn, args.n, b, rows=probe), sizes, device, repeats=1)
    systems = {"floor": floor_fn(model, ids, attn, args.n, chunk), **systems}
    times: dict[str, list[float]] = {k: [] for k in systems}
    for rep in range(args.reps):
        for key, fn in systems.items():  # interleaved repetitions
            times[key].append(timed(fn, device))
            print(f"rep {rep} {key}: {times[key][-1]:.3f} s", flush=True)
    res = {k: summary(v) for k, v in times.items()}
    floor = res["floor"]["median"]
    out = header(device)
    out.update(
        benchmark="bench_text_gpu",
        quick=args.quick,
        model=impl,
        config=cfg,
        dtype=str(dtype),
        n_samples=args.n,
        batch=args.batch,
        length=args.length,
        torchlime_chunks=chunks,
        floor_chunk=dict(chunk=chunk, candidates_seconds=tried),
        repetitions=args.reps,
        preset="lime_text",
        note=("smoke run with a tiny config: proves the script runs, not a measurement") if args.quick else "",
        seconds=res,
        peak_memory_bytes={m: st["meta"].get("peak_memory") for m, st in stores.items()},
        explanations_per_second={k: args.batch / v["median"] for k, v in res.items() if k != "floor"},
        floor_rows_per_second=args.batch * args.n / floor,
        ratio_to_floor={k: v["median"] / floor for k, v in res.items() if k != "floor"},
    )
    name = f"text_gpu_{device.type}{'_quick' if args.quick else ''}.json"
    print("wrote", write(name, out, args.out))
    for k, v in out["ratio_to_floor"].items():
        print(f"{k}: {out['explanations_per_second'][k]:.2f} explanations/s, {v:.2f}x the forward floor")


if __name__ == "__main__":
    main()
