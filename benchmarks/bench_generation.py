"""Explaining a generated continuation: torchlime's ``explain_generation`` beside captum's
``LLMAttribution(Lime(model), tokenizer)`` and the forward floor, on the CPU.

The model is a ``GPT2LMHeadModel`` from a small config with random weights (speed does not depend on
them): 4 layers, 4 heads, width 128, a vocabulary of 100 words, seed 0. The prompt is 12 words of a
word-level Hugging Face fast tokenizer built here (``tokenizers.WordLevel`` wrapped by
``transformers.PreTrainedTokenizerFast``, no download; id 0 is ``[UNK]``, the hidden-token id of both
systems: captum's ``TextTokenInput`` baseline 0 and torchlime's ``mask_id=0``). The continuation is
the 6 tokens torchlime generates greedily; both systems then explain those ids (teacher-forced
log-probability of the continuation), with N = 200 samples, the 12 prompt tokens as features.
Interleaved repetitions (after a warm-up) of:

* ``torchlime``: ``explain_generation(model, ids, mask_id=0, target=Continuation(ids), n_samples=N)``,
  default settings (batch size measured), whole continuation and each token explained (T = 1 + G);
* ``torchlime_generating``: the same with ``Continuation(max_new_tokens=6)``: the greedy generation
  (6 model calls) inside the timed call;
* ``captum_default``: ``LLMAttribution(Lime(model), tok).attribute(TextTokenInput(prompt, tok),
  target=ids, n_samples=N)``: captum's defaults, ``forward_in_tokens=True, use_cached_outputs=True``
  (one cached decoding step per continuation token per sample), ``perturbations_per_eval=1``;
* ``captum_best``: the same with ``forward_in_tokens=False`` (one teacher-forced forward per sample:
  the score torchlime computes). Captum's batching knob, Lime's ``perturbations_per_eval``, cannot be
  raised above 1 here: ``LLMAttribution``'s forward functions build batch-1 tensors (the attempt and
  its error are recorded);
* ``floor``: the bare batched forward of N prebuilt perturbed rows (prompt with Bernoulli(1/2) hidden
  tokens, then the continuation) through the same model under ``torch.inference_mode()``, at the best
  of several batch sizes: what no LIME can beat.

Captum's Lime explains the whole continuation only (``token_attr`` is None for Lime in
``LLMAttribution``); torchlime explains it and every token at no extra model call. Agreement is
checked on a planted copy model (token g copies prompt position 2g + 1): for torchlime, whether each
generated token's top prompt token is its source (per token) and whether the whole continuation's
top 6 are the 6 sources; for captum the whole continuation's top 6, and per token with one extra
``LLMAttribution`` call per token (the prompt plus the tokens generated before it as the input, that
token as the target, the top among the prompt's 12 positions). On the random GPT-2 the two systems'
whole-continuation attributions are correlated (Pearson), as a sanity check only.

    python benchmarks/bench_generation.py --threads 1   # results/generation_cpu.json (as committed: one
                                                        # torch thread, the 2-core machine being shared)
    python benchmarks/bench_generation.py --quick   # results/generation_cpu_quick.json (smoke run)
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
from torch import nn

from torchlime.targets.continuation import Continuation
from torchlime.text import explain_generation

from benchmarks.common import (
    best_chunk,
    common_args,
    device_arg,
    exit_if_stopped,
    forward_rows,
    header,
    load_average,
    optional_module,
    size_defaults,
    smoke_threads,
    summary,
    timed,
    until_stopped,
    write,
)

VOCAB, N_LAYER, N_HEAD, N_EMBD = 100, 4, 4, 128
PROMPT_WORDS, NEW_TOKENS, MASK_ID = 12, 6, 0
FLOOR_SIZES = (1, 10, 25, 50, 100, 200)


def word_tokenizer(vocab_size: int = VOCAB):
    """A word-level Hugging Face fast tokenizer: ``[UNK]`` = 0, ``[PAD]`` = 1, ``w2`` ... ``w{V-1}``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, "[PAD]": 1, **{f"w{i}": i for i in range(2, vocab_size)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece()  # joins the words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]")


def gpt2(device: torch.device) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD, vocab_size=VOCAB, n_positions=64)
    return GPT2LMHeadModel(cfg).eval().to(device)


class CopyLM(nn.Module):
    """Causal LM whose token at position q >= lp copies the prompt token at position 2 * (q - lp) + 1
    (tests/targets/test_continuation.py's planted model, re-created here), returning ``.logits``."""

    def __init__(self, lp: int = PROMPT_WORDS, vocab: int = VOCAB) -> None:
        super().__init__()
        self.lp, self.vocab = lp, vocab
        self.register_buffer("anchor", torch.zeros(1))  # captum reads the model's device from it

    @property
    def device(self) -> torch.device:
        return self.anchor.device

    def forward(self, input_ids: torch.Tensor, attention_mask: Any = None, **_: Any):
        from transformers.modeling_outputs import CausalLMOutput

        length = input_ids.shape[1]
        q = torch.arange(1, length + 1, device=input_ids.device)  # the position each logit predicts
        src = (2 * (q - self.lp) + 1).clamp(0, length - 1)
        copied = input_ids[:, src]
        return CausalLMOutput(logits=8.0 * nn.functional.one_hot(copied, self.vocab).float())


def run_torchlime(model, ids: torch.Tensor, cont: torch.Tensor | None, n: int, seed: int):
    target = Continuation(cont) if cont is not None else Continuation(max_new_tokens=NEW_TOKENS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the quality check's warnings on a random model
        return explain_generation(model, ids, mask_id=MASK_ID, target=target, n_samples=n, generator=seed)


def run_captum(model, tok, prompt: str, cont: torch.Tensor, n: int, seed: int, **kwargs: Any):
    """One ``LLMAttribution(Lime(model), tok).attribute`` call on the 1-D continuation ids ``cont``."""
    from captum.attr import Lime, LLMAttribution, TextTokenInput

    torch.manual_seed(seed)  # captum's Lime draws its samples from the global generator
    llm = LLMAttribution(Lime(model), tok)
    inp = TextTokenInput(prompt, tok, baselines=MASK_ID)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return llm.attribute(inp, target=cont, n_samples=n, **kwargs)


def floor_rows(ids: torch.Tensor, cont: torch.Tensor, n: int, seed: int = 0) -> torch.Tensor:
    """N perturbed rows (prompt tokens hidden with probability 1/2, row 0 intact) + the continuation."""
    g = torch.Generator().manual_seed(seed)
    keep = torch.rand(n, ids.shape[1], generator=g) < 0.5
    keep[0] = True
    prompts = torch.where(keep.to(ids.device), ids, torch.full_like(ids, MASK_ID))
    return torch.cat([prompts, cont.expand(n, -1)], 1)


def pearson(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double().flatten(), b.double().flatten()
    a, b = a - a.mean(), b - b.mean()
    return float((a * b).sum() / (a.norm() * b.norm()).clamp_min(1e-300))


def agreement(tok, prompt: str, ids: torch.Tensor, n: int, device: torch.device) -> dict:
    """Top prompt token of each generated token against its planted source, on the copy model."""
    model = CopyLM().to(device)
    sources = [2 * g + 1 for g in range(NEW_TOKENS)]
    exp = run_torchlime(model, ids, None, n, 0)
    cont = exp.info.continuation
    planted = bool(cont[0].tolist() == ids[0, sources].tolist())
    idx, _ = exp.top_features(1)
    tl_tokens = [int(i) == s for i, s in zip(idx[0, 1:, 0].tolist(), sources)]
    top_g, _ = exp.top_features(NEW_TOKENS)
    tl_whole = sorted(top_g[0, 0].tolist()) == sources
    out = dict(
        model=f"CopyLM: token g copies prompt position 2g+1 (prompt {PROMPT_WORDS} tokens, G = {NEW_TOKENS})",
        n_samples=n,
        continuation_is_planted=planted,
        sources=sources,
        torchlime=dict(
            per_token_top1=[int(i) for i in idx[0, 1:, 0].tolist()],
            per_token_fraction_correct=sum(tl_tokens) / NEW_TOKENS,
            whole_top_g_are_sources=bool(tl_whole),
            model_calls=1,
        ),
    )
    try:
        res = run_captum(model, tok, prompt, cont[0], n, 0, forward_in_tokens=False)
        whole = res.seq_attr.detach().cpu()
        cp_whole = sorted(whole.topk(NEW_TOKENS).indices.tolist()) == sources
        per_token = []
        words = prompt.split()
        cont_words = tok.convert_ids_to_tokens(cont[0].tolist())
        for g in range(NEW_TOKENS):  # one extra call per token: prompt + tokens before it -> token g
            text = " ".join(words + cont_words[:g])
            r = run_captum(model, tok, text, cont[0, g : g + 1], n, 0, forward_in_tokens=False)
            per_token.append(int(r.seq_attr.detach().cpu()[:PROMPT_WORDS].argmax()))
        out["captum"] = dict(
            call="LLMAttribution(Lime(model), tok).attribute(TextTokenInput(...), target=ids, n_samples=N, "
            "forward_in_tokens=False); per token: one call per token (input = prompt + earlier tokens, target = "
            "that token, top among the prompt positions), as LLMAttribution gives no token_attr for Lime",
            token_attr_is_none=res.token_attr is None,
            per_token_top1=per_token,
            per_token_fraction_correct=sum(int(p == s) for p, s in zip(per_token, sources)) / NEW_TOKENS,
            whole_top_g_are_sources=bool(cp_whole),
            calls=1 + NEW_TOKENS,
        )
    except Exception as err:  # noqa: BLE001 - recorded, not fatal
        out["captum"] = dict(error=f"{type(err).__name__}: {err}")
    return out


def captum_cached_check(model, tok, prompt: str, cont: torch.Tensor, n: int) -> dict:
    """captum's true default (``forward_in_tokens=True, use_cached_outputs=True``): does it run, and does
    its score of the unperturbed prompt equal the uncached one (the teacher-forced log-probability)?"""
    from captum.attr import Lime, LLMAttribution, TextTokenInput

    out: dict[str, Any] = {}
    try:
        run_captum(model, tok, prompt, cont, n, 0)
        out["runs"] = "ok"
    except Exception as err:  # noqa: BLE001 - the failure is the finding
        out["runs"] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
    llm = LLMAttribution(Lime(model), tok)
    inp = TextTokenInput(prompt, tok, baselines=MASK_ID)
    for g in (1, 2, 3):
        with torch.no_grad():
            try:
                cached = float(llm._forward_func(None, inp, cont[:g], True, None, True))
            except Exception as err:  # noqa: BLE001
                cached = f"{type(err).__name__}"
            uncached = float(llm._forward_func(None, inp, cont[:g], False, None, True))
        out[f"log_prob_first_{g}_tokens"] = dict(cached=cached, uncached=uncached)
    return out


def try_batched_captum(model, tok, prompt: str, cont: torch.Tensor, n: int) -> dict:
    """Whether captum's Lime batches through LLMAttribution: perturbations_per_eval > 1."""
    out = {}
    for fit in (False, True):
        key = f"forward_in_tokens={fit}"
        try:
            run_captum(
                model,
                tok,
                prompt,
                cont,
                n,
                0,
                forward_in_tokens=fit,
                use_cached_outputs=False,
                perturbations_per_eval=10,
            )
            out[key] = "ok"
        except Exception as err:  # noqa: BLE001 - the failure is the finding
            out[key] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
    return out


def main() -> None:
    parser = common_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--n-samples", type=int, default=None, help="N (default 200, quick 16)")
    parser.add_argument("--reps", type=int, default=None, help="interleaved repetitions (default 5, quick 3)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's; quick 1)")
    args = size_defaults(parser.parse_args(), dict(n_samples=(16, 200), reps=(3, 5)))
    device = device_arg(args.device)
    smoke_threads(args, device)
    captum, why = optional_module("captum.attr")
    n = args.n_samples

    tok = word_tokenizer()
    gen = torch.Generator().manual_seed(0)
    words = (torch.randperm(VOCAB - 2, generator=gen)[:PROMPT_WORDS] + 2).tolist()  # distinct words
    prompt = " ".join(f"w{i}" for i in words)
    ids = tok.encode(prompt, return_tensors="pt").to(device)
    assert ids.tolist() == [words], (ids, words)
    model = gpt2(device)
    first = run_torchlime(model, ids, None, n, 0)
    cont = first.info.continuation  # (1, G): the continuation both systems explain
    with torch.inference_mode():
        hf = model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=1)[:, ids.shape[1] :]

    record: dict[str, Any] = {}
    times: dict[str, list[float]] = {}
    size, floor_sizes, batch_sizes = None, {}, set()
    extra: dict[str, Any] = {}
    agree: dict[str, Any] = {}
    with until_stopped(record):
        rows = floor_rows(ids, cont, n)

        def lm(x: torch.Tensor) -> torch.Tensor:
            return model(input_ids=x).logits

        size, floor_sizes = best_chunk(lambda c: forward_rows(lm, rows, c), FLOOR_SIZES, device)
        systems: dict[str, Callable[[int], Any]] = {
            "torchlime": lambda s: run_torchlime(model, ids, cont, n, s),
            "torchlime_generating": lambda s: run_torchlime(model, ids, None, n, s),
            "floor": lambda s: forward_rows(lm, rows, size)(),
        }
        if captum is not None:
            systems["captum_default_uncached"] = lambda s: run_captum(
                model, tok, prompt, cont[0], n, s, use_cached_outputs=False
            )
            systems["captum_best"] = lambda s: run_captum(model, tok, prompt, cont[0], n, s, forward_in_tokens=False)
        for _ in range(3):  # warm-up: imports, allocations, torchlime's batch-size measurement settling
            batch_sizes.add(int(run_torchlime(model, ids, cont, n, 0).meta["batch_size"]))
        for fn in systems.values():
            fn(0)
        times.update({k: [] for k in systems})
        for rep in range(args.reps):
            for name, fn in systems.items():
                times[name].append(timed(lambda fn=fn, s=rep + 1: fn(s), device))
            print(f"rep {rep}: " + ", ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in times.items()), flush=True)
        tl_exp = run_torchlime(model, ids, cont, n, 0)
        extra["torchlime_batch_size"] = int(tl_exp.meta["batch_size"])
        if captum is not None and device.type != "cuda":
            extra["captum_default_cached"] = captum_cached_check(model, tok, prompt, cont[0], n)
        elif captum is not None:  # its out-of-range index is a device-side assert there: the process's CUDA ends
            extra["captum_default_cached"] = "not run on CUDA: captum's cached path indexes out of range (CPU JSON)"
        if captum is not None:
            cp = run_captum(model, tok, prompt, cont[0], n, 0, forward_in_tokens=False)
            extra["gpt2_whole_continuation_pearson_torchlime_vs_captum_best"] = pearson(tl_exp.coef[0, 0], cp.seq_attr)
            extra["captum_perturbations_per_eval_10"] = try_batched_captum(model, tok, prompt, cont[0], n)
        agree.update(agreement(tok, prompt, ids, n, device))

    med = {k: statistics.median(v) for k, v in times.items()} if record.get("stopped_early") is None else {}
    ratios = {}
    if med:
        ratios["torchlime_over_floor"] = med["torchlime"] / med["floor"]
        ratios["torchlime_generating_over_floor"] = med["torchlime_generating"] / med["floor"]
        if captum is not None:
            ratios["captum_default_uncached_over_torchlime"] = med["captum_default_uncached"] / med["torchlime"]
            ratios["captum_best_over_torchlime"] = med["captum_best"] / med["torchlime"]
            ratios["captum_best_over_floor"] = med["captum_best"] / med["floor"]
    result = dict(
        header(device),
        threads=torch.get_num_threads(),
        load_average=load_average(),
        quick=args.quick,
        setup=dict(
            model=f"GPT2LMHeadModel(n_layer={N_LAYER}, n_head={N_HEAD}, n_embd={N_EMBD}, vocab_size={VOCAB}, "
            "n_positions=64), random weights, seed 0, eval",
            tokenizer="tokenizers.WordLevel (+WhitespaceSplit) wrapped by transformers.PreTrainedTokenizerFast",
            prompt=prompt,
            prompt_ids=ids[0].tolist(),
            continuation_ids=cont[0].tolist(),
            continuation_equals_model_generate=bool(torch.equal(hf.cpu(), cont.cpu())),
            n_features=PROMPT_WORDS,
            new_tokens=NEW_TOKENS,
            n_samples=n,
            hidden_token_id=MASK_ID,
            reps=args.reps,
            torchlime_call="explain_generation(model, ids, mask_id=0, target=Continuation(cont), n_samples=N, "
            "generator=seed): defaults otherwise; T = 1 + G targets",
            captum_call="LLMAttribution(Lime(model), tok).attribute(TextTokenInput(prompt, tok, baselines=0), "
            "target=cont_ids, n_samples=N[, forward_in_tokens=False]); Lime defaults otherwise "
            "(SkLearnLasso(alpha=0.01), exp kernel on cosine distance, perturbations_per_eval=1); whole "
            "continuation only",
            captum=why or "captum.attr",
            floor=f"model(input_ids=rows).logits over N prebuilt rows in chunks, inference_mode, sizes {FLOOR_SIZES}",
        ),
        systems={k: summary(v) for k, v in times.items()},
        floor_batch_size=size,
        floor_seconds_by_batch_size=floor_sizes,
        torchlime_batch_sizes_in_warm_up=sorted(batch_sizes),
        ratios=ratios,
        agreement_copy_model=agree,
        **extra,
        stopped_early=record.get("stopped_early"),
    )
    path = write(f"generation_{device.type}{'_quick' if args.quick else ''}.json", result, args.out)
    print(f"wrote {path}")
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}")
    print("agreement:", {k: agree.get(k) for k in ("torchlime", "captum")})
    exit_if_stopped(record)


if __name__ == "__main__":
    main()
