"""Text explanations per second on a BERT-base-sized classifier, and the ratio to its forward-pass floor.

A transformer classifier is built from a config with random weights (speed
does not depend on them): ``transformers.BertForSequenceClassification`` of
BERT-base size when transformers is installed, else a pure-torch encoder of the
same size. B inputs of L = 128 tokens are explained with ``explain_tokens``
(lime's text preset, N = 5000 samples each); the floor is the bare chunked
forward pass of the same B·N rows at the same chunk size under
``inference_mode``. Reported: median seconds, explanations per second and
explain / floor.

    python benchmarks/bench_text_gpu.py                      # CUDA, BERT-base, bf16, N=5000
    python benchmarks/bench_text_gpu.py --modes replace delete infill
    python benchmarks/bench_text_gpu.py --quick              # tiny config on CPU: proves it runs, not a speed
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import header, summary, timed, write  # noqa: E402

from torchlime.text import explain_tokens  # noqa: E402
from torchlime.text.infill import Infiller  # noqa: E402

PAD, CLS, SEP, MASK = 0, 101, 102, 103  # BERT uncased ids
BASE = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
            intermediate_size=3072, max_position_embeddings=512)
TINY = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=512)


class TorchEncoder(nn.Module):
    """Pure-torch BERT-like encoder (used when transformers is missing): ids + mask -> logits or MLM logits."""

    def __init__(self, cfg: dict, n_labels: int = 2, mlm: bool = False) -> None:
        super().__init__()
        d = cfg["hidden_size"]
        self.tok = nn.Embedding(cfg["vocab_size"], d)
        self.pos = nn.Embedding(cfg["max_position_embeddings"], d)
        layer = nn.TransformerEncoderLayer(d, cfg["num_attention_heads"], cfg["intermediate_size"],
                                           activation="gelu", batch_first=True, norm_first=False)
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


def floor_fn(model: nn.Module, ids: torch.Tensor, attn: torch.Tensor, n: int, chunk: int) -> Callable[[], None]:
    """The bare forward pass of B·N rows (the inputs repeated) in chunks."""
    rows = ids.repeat_interleave(n, 0)
    mask = attn.repeat_interleave(n, 0)

    def run() -> None:
        with torch.inference_mode():
            for i in range(0, rows.shape[0], chunk):
                model(input_ids=rows[i:i + chunk], attention_mask=mask[i:i + chunk])  # timed() syncs
    return run


def explain_fn(model: nn.Module, ids: torch.Tensor, attn: torch.Tensor, n: int, chunk: int, mode: str,
               mlm: Any) -> Callable[[], None]:
    def run() -> None:
        infill = Infiller(mlm, mlm_inputs="keywords", synonym_threshold=0.9) if mode == "infill" else None
        exp = explain_tokens(model, ids, attention_mask=attn, special_ids=[CLS, SEP], mode=mode, mask_id=MASK,
                             pad_id=PAD, model_inputs="keywords", preset="lime_text", n_samples=n,
                             batch_size=chunk, infill=infill)
        exp.coef.sum().item()
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=4, help="inputs explained together (B)")
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--chunk", type=int, default=None, help="rows per model call (default: explain_tokens')")
    ap.add_argument("--dtype", choices=["fp32", "bf16", "fp16"], default=None)
    ap.add_argument("--modes", nargs="+", default=["replace", "delete"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="tiny config, N=100, B=2, 1 rep, all modes")
    args = ap.parse_args()
    device = torch.device(args.device)
    cfg = TINY if args.quick else BASE
    if args.quick:
        args.n, args.batch, args.reps, args.modes = 100, 2, 1, ["replace", "delete", "infill"]
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[
        args.dtype or ("bf16" if device.type == "cuda" else "fp32")]
    model, impl = build(cfg, False, device, dtype)
    mlm = build(cfg, True, device, dtype)[0] if "infill" in args.modes else None
    ids, attn = inputs(args.batch, args.length, cfg["vocab_size"], device)
    chunk = args.chunk or max(1, (1 << (16 if device.type == "cuda" else 14)) // args.length)
    systems = {"floor": floor_fn(model, ids, attn, args.n, chunk)}
    for mode in args.modes:
        systems[f"explain_{mode}"] = explain_fn(model, ids, attn, args.n, chunk, mode, mlm)
    for mode in args.modes:  # warm-up (kernels, allocator) on few samples
        explain_fn(model, ids, attn, 16, chunk, mode, mlm)()
    floor_fn(model, ids, attn, 16, chunk)()
    times: dict[str, list[float]] = {k: [] for k in systems}
    for rep in range(args.reps):
        for key, fn in systems.items():  # interleaved repetitions
            times[key].append(timed(fn, device))
            print(f"rep {rep} {key}: {times[key][-1]:.3f} s", flush=True)
    res = {k: summary(v) for k, v in times.items()}
    floor = res["floor"]["median"]
    out = header(device)
    out.update(benchmark="bench_text_gpu", model=impl, config=cfg, dtype=str(dtype), n_samples=args.n,
               batch=args.batch, length=args.length, chunk=chunk, repetitions=args.reps, preset="lime_text",
               note=("CPU smoke run with a tiny config: proves the script works; the numbers are not a "
                     "speed claim") if args.quick else "", seconds=res,
               explanations_per_second={k: args.batch / v["median"] for k, v in res.items() if k != "floor"},
               floor_rows_per_second=args.batch * args.n / floor,
               ratio_to_floor={k: v["median"] / floor for k, v in res.items() if k != "floor"})
    name = f"text_gpu_{device.type}{'_quick' if args.quick else ''}.json"
    print("wrote", write(name, out))
    for k, v in out["ratio_to_floor"].items():
        print(f"{k}: {out['explanations_per_second'][k]:.2f} explanations/s, {v:.2f}x the forward floor")


if __name__ == "__main__":
    main()
