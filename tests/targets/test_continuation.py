"""``Continuation`` and ``explain_generation``: teacher-forced log-probs against a slow per-sample
reference, a planted copy model, a real (tiny, random) GPT-2, the errors, and the ``Generation`` modality
that the door runs (``Explainer().explain`` gives the same bits)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from torchlime.engine import Explainer
from torchlime.targets.continuation import Continuation
from torchlime.text import Generation
from torchlime.text._explain import explain_generation
from torchlime.text._generation import left_pad

LP = 6  # prompt length of the copy model


class CopyLM(nn.Module):
    """Causal LM whose token at position q >= LP copies the prompt token at position 2 * (q - LP) + 1."""

    def __init__(self, vocab: int = 32) -> None:
        super().__init__()
        self.vocab = vocab

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        length = input_ids.shape[1]
        q = torch.arange(1, length + 1, device=input_ids.device)  # the position each logit predicts
        src = (2 * (q - LP) + 1).clamp(0, length - 1)
        copied = input_ids[:, src]  # (B, L): only reads earlier positions for q >= LP
        return 8.0 * nn.functional.one_hot(copied, self.vocab).float()


@pytest.fixture(scope="module")
def gpt2() -> nn.Module:
    """A 2-layer GPT-2 with random weights, taken as it is (importing transformers is the slow part)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=64)
    return transformers.GPT2LMHeadModel(cfg).eval()


def prompts() -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.tensor([[5, 9, 13, 17, 21, 25, 29], [0, 0, 7, 11, 3, 40, 41], [8, 33, 2, 19, 0, 0, 0]])
    attn = torch.tensor([[1] * 7, [0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0, 0]])  # left and right padding
    return ids, attn


def slow_scores(model: nn.Module, exp, mask_id: int, delete: bool = False) -> torch.Tensor:
    """(B, S, 1 + G) rebuilt sample by sample: the prompt's tokens with the hidden ones masked (or deleted),
    no padding, then the continuation; the model at batch 1 with its own positions."""
    rows, attn, cont = exp.info.input_ids, exp.info.attention_mask, exp.info.continuation
    b_n, s_n, _ = exp.samples.shape
    g = cont.shape[1]
    out = torch.empty(b_n, s_n, 1 + g)
    with torch.no_grad():
        for b in range(b_n):
            feats = exp.features[b].tolist()
            for s in range(s_n):
                tokens = []
                for t, f, a in zip(rows[b].tolist(), feats, attn[b].tolist()):
                    kept = f < 0 or bool(exp.samples[b, s, f])
                    if a and (kept or not delete):
                        tokens.append(t if kept else mask_id)
                logits = model(input_ids=torch.tensor([tokens])).logits[0].float()
                start = len(tokens) - g
                lp = [float(logits[start + j - 1].log_softmax(-1)[cont[b, j]]) for j in range(g)]
                out[b, s] = torch.tensor([sum(lp), *lp])
    return out


def test_scores_equal_a_slow_per_sample_reference(gpt2):
    model, (ids, attn) = gpt2, prompts()
    exp = explain_generation(
        model,
        ids,
        attention_mask=attn,
        mask_id=1,
        target=Continuation(max_new_tokens=3),
        n_samples=12,
        generator=0,
        return_samples=True,
        batch_size=5,
    )
    assert exp.outputs.shape == (3, 12, 4)
    torch.testing.assert_close(exp.outputs, slow_scores(model, exp, 1), atol=1e-4, rtol=0)
    assert torch.equal(exp.features[:, -3:], torch.full((3, 3), -1))  # the continuation is never perturbed


def test_deleted_prompt_tokens_shorten_the_prompt_with_positions_right(gpt2):
    model, (ids, attn) = gpt2, prompts()
    kw = dict(attention_mask=attn, mask_id=1, mode="delete", n_samples=12, generator=0, return_samples=True)
    exp = explain_generation(model, ids, target=Continuation(max_new_tokens=3), batch_size=5, **kw)
    # a sample that deletes every prompt token leaves the first continuation token no context to be scored
    # from (a causal LM has no prediction before its first token): those samples are left out here
    some = (exp.samples & exp.valid.unsqueeze(1)).any(-1)  # (B, S)
    slow = slow_scores(model, exp, 1, delete=True)
    torch.testing.assert_close(exp.outputs[some], slow[some], atol=1e-4, rtol=0)
    again = explain_generation(model, ids, target=Continuation(max_new_tokens=3), batch_size=5, **kw)
    assert torch.equal(exp.coef, again.coef)  # the same seed and chunks: the same bits


def test_per_token_false_keeps_the_whole_continuation_only(gpt2):
    model, (ids, attn) = gpt2, prompts()
    kw = dict(attention_mask=attn, mask_id=1, n_samples=12, generator=0, return_samples=True)
    full = explain_generation(model, ids, target=Continuation(max_new_tokens=2), **kw)
    whole = explain_generation(model, ids, target=Continuation(max_new_tokens=2, per_token=False), **kw)
    assert whole.coef.shape[1] == 1
    torch.testing.assert_close(whole.outputs[..., 0], full.outputs[..., 0])


def test_the_copy_model_s_source_token_is_each_token_s_top_feature(device):
    ids = torch.tensor([[11, 12, 13, 14, 15, 16], [21, 22, 23, 24, 25, 26]], device=device)
    exp = explain_generation(
        CopyLM().to(device), ids, mask_id=0, target=Continuation(max_new_tokens=3), n_samples=200, generator=0
    )
    assert exp.info.continuation.tolist() == [[12, 14, 16], [22, 24, 26]]
    idx, _ = exp.top_features(1)
    assert idx[:, 1:, 0].tolist() == [[1, 3, 5]] * 2  # token g copies prompt position 2g + 1
    top3, _ = exp.top_features(3)
    assert sorted(top3[0, 0].tolist()) == [1, 3, 5] and sorted(top3[1, 0].tolist()) == [1, 3, 5]


def test_logits_in_a_dataclass_are_read_row_by_row_as_a_tensor_s_are():
    @dataclasses.dataclass
    class Output:  # a causal LM's output that is neither a tensor nor a dict
        logits: torch.Tensor

    ids = torch.tensor([[11, 12, 13, 14, 15, 16]])
    kw = dict(mask_id=0, target=Continuation(max_new_tokens=1, per_token=False), n_samples=64, generator=0)
    plain = explain_generation(CopyLM(), ids, **kw)
    wrapped = explain_generation(lambda i, attention_mask=None: Output(CopyLM()(i)), ids, **kw)
    assert torch.equal(wrapped.coef, plain.coef) and wrapped.top_features(1)[0].item() == 1  # copies position 1


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")  # log p(9) is flat
def test_given_continuation_ids_are_explained_as_they_are():
    ids = torch.tensor([[11, 12, 13, 14, 15, 16]])
    exp = explain_generation(
        CopyLM(),
        ids,
        mask_id=0,
        target=Continuation(torch.tensor([[12, 9]])),
        n_samples=32,
        generator=0,
        return_samples=True,
    )
    assert exp.info.continuation.tolist() == [[12, 9]] and exp.coef.shape == (1, 3, 6)
    assert exp.outputs[0, 0, 2] < -7  # the copy model does not predict 9


def test_gpt2_shapes_finite_and_seeded_bit_identity(gpt2):
    model, (ids, attn) = gpt2, prompts()

    class Tok:
        def batch_decode(self, rows):
            return [" ".join(map(str, r)) for r in rows]

    kw = dict(attention_mask=attn, mask_id=1, target=Continuation(max_new_tokens=4), n_samples=48, generator=3)
    one = explain_generation(model, ids, tokenizer=Tok(), **kw)
    two = explain_generation(model, ids, **kw)
    assert one.coef.shape == (3, 5, 7) and torch.isfinite(one.coef).all() and torch.isfinite(one.score).all()
    assert torch.equal(one.coef, two.coef) and torch.equal(one.intercept, two.intercept)
    assert one.info.continuation.shape == (3, 4) and len(one.info.continuation_text) == 3
    assert torch.equal(one.info.attention_mask[2, :3], torch.zeros(3, dtype=torch.long))  # re-padded left


def test_left_pad_keeps_token_order():
    ids, attn = prompts()
    out, mask, _ = left_pad(ids, attn)
    assert out[2].tolist() == [0, 0, 0, 8, 33, 2, 19] and torch.equal(out[:2], ids[:2])
    assert mask[2].tolist() == [0, 0, 0, 1, 1, 1, 1]


def test_errors_name_the_argument():
    ids = torch.tensor([[11, 12, 13, 14, 15, 16], [21, 22, 23, 24, 25, 26]])
    with pytest.raises(ValueError, match="`mode` must be one of"):
        explain_generation(CopyLM(), ids, mask_id=0, mode="drop")
    with pytest.raises(ValueError, match="`max_new_tokens` must be an int >= 1"):
        Continuation(max_new_tokens=0)
    with pytest.raises(ValueError, match=r"`token_ids` must hold one continuation per input: shape \(2, G\)"):
        explain_generation(CopyLM(), ids, mask_id=0, target=Continuation(torch.ones(3, 2, dtype=torch.long)))
    with pytest.raises(ValueError, match="`token_ids` must have shape"):
        Continuation(torch.ones(3, dtype=torch.long))
    with pytest.raises(TypeError, match="`target` must be a torchlime.targets.Continuation"):
        explain_generation(CopyLM(), ids, mask_id=0, target=3)
    with pytest.raises(ValueError, match="Continuation.prepared"):
        Continuation().bind(torch.zeros(2, 6, 32), 2)
    with pytest.raises(ValueError, match=r"`mask_id` must be in \[0, 32\) \(the model's vocabulary size\), got 99"):
        explain_generation(CopyLM(), ids, mask_id=99)  # the logits' width, read while generating
    with pytest.raises(ValueError, match=r"mode='replace' needs `mask_id`"):
        explain_generation(CopyLM(), ids)
    kw = dict(mode="delete", target=Continuation(max_new_tokens=1), n_samples=16)
    assert explain_generation(CopyLM(), ids, **kw).coef.shape == (2, 2, 6)  # delete needs no mask id


def test_infilled_prompt_tokens_keep_the_continuation_in_place():
    from torchlime.text.infill import Infiller

    from tests.helpers.text import ToyMLM

    ids = torch.tensor([[11, 12, 13, 14, 15, 16], [21, 22, 23, 24, 25, 26]])
    infill = Infiller(ToyMLM(vocab=32), synonym_threshold=None)
    exp = explain_generation(
        CopyLM(),
        ids,
        mask_id=0,
        mode="infill",
        infill=infill,
        target=Continuation(max_new_tokens=3),
        n_samples=64,
        generator=0,
        return_samples=True,
    )
    assert exp.info.continuation.tolist() == [[12, 14, 16], [22, 24, 26]]
    assert torch.equal(exp.features[:, -3:], torch.full((2, 3), -1)) and torch.isfinite(exp.coef).all()
    idx, _ = exp.top_features(1, by="abs")
    assert idx[:, 1:, 0].tolist() == [[1, 3, 5]] * 2  # a replaced source token changes the copied one


def test_max_new_tokens_is_bounded_before_any_generation():
    from torchlime.targets.continuation import MAX_NEW_TOKENS

    assert MAX_NEW_TOKENS == 2**16
    with pytest.raises(ValueError, match=r"`max_new_tokens` must be at most 65536 \(2\*\*16, .*\), got 1000000000"):
        Continuation(max_new_tokens=10**9)  # generated one token at a time, without end, before
    assert Continuation(max_new_tokens=MAX_NEW_TOKENS).n_tokens == MAX_NEW_TOKENS


def test_absurd_n_samples_is_refused_after_generation_before_sampling():
    calls = []

    def lm(input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        calls.append(input_ids.shape[0])
        return CopyLM()(input_ids)

    ids = torch.tensor([[11, 12, 13, 14, 15, 16]])
    with pytest.raises(ValueError, match=r"^`n_samples`=1000000000000 needs .* TiB"):
        explain_generation(lm, ids, mask_id=0, target=Continuation(max_new_tokens=2), n_samples=10**12)
    assert calls == [1, 1]  # the two greedy steps of the continuation, no sample


def same_bits(one, two) -> None:
    """Two explanations hold the same numbers, features, rows and records."""
    for name in ("coef", "intercept", "score", "local_pred", "target", "features", "n_features"):
        assert torch.equal(getattr(one, name), getattr(two, name)), name
    for name in ("samples", "outputs", "weights"):
        a, b = getattr(one, name), getattr(two, name)
        assert (a is None and b is None) or torch.equal(a, b), name
    for key in ("continuation", "input_ids", "attention_mask"):
        assert torch.equal(getattr(one.info, key), getattr(two.info, key)), key
    assert one.info == two.info and one.meta["text_generation"] == two.meta["text_generation"]


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")  # few samples: bits only
@pytest.mark.parametrize(
    "fields, call",
    [
        (dict(mask_id=1), dict(target=Continuation(max_new_tokens=2), n_samples=8, batch_size=5)),
        (dict(mask_id=1, mode="delete"), dict(target=Continuation(max_new_tokens=2, per_token=False))),
        (dict(mask_id=1, word_ids=torch.tensor([[0, 0, 1, 1, 2, 2, 3]])), dict(target=Continuation(max_new_tokens=2))),
        (dict(mask_id=1), dict(target=Continuation(torch.tensor([[3, 4], [5, 6], [7, 8]])), masks="given")),
    ],
)
def test_the_door_is_the_generation_modality_bit_for_bit(gpt2, fields, call):
    ids, attn = prompts()
    if call.get("masks") == "given":  # explicit masks: (B, S, F) with F the 7 prompt tokens
        masks = torch.rand(3, 10, 7, generator=torch.Generator().manual_seed(1)) > 0.5
        call = dict(call, masks=masks.index_fill(1, torch.tensor([0]), True), n_samples=10)
    kw = dict(call, n_samples=call.get("n_samples", 8), generator=0, return_samples=True)
    door = explain_generation(gpt2, ids, attention_mask=attn, **fields, **kw)
    how = {k: kw.pop(k) for k in ("batch_size",) if k in kw}
    engine = Explainer(**how).explain(gpt2, ids, Generation(attention_mask=attn, **fields), **kw)
    same_bits(door, engine)
    assert isinstance(engine.info, type(door.info)) and engine.config == door.config


def test_the_generation_modality_on_a_plain_callable_with_infill():
    from torchlime.text.infill import Infiller

    from tests.helpers.text import ToyMLM

    ids = torch.tensor([[11, 12, 13, 14, 15, 16], [21, 22, 23, 24, 25, 26]])
    fields = dict(mask_id=0, mode="infill", infill=Infiller(ToyMLM(vocab=32), synonym_threshold=None))
    kw = dict(target=Continuation(max_new_tokens=2), n_samples=32, generator=0)
    same_bits(
        explain_generation(CopyLM(), ids, **fields, **kw),
        Explainer().explain(CopyLM(), ids, Generation(**fields), **kw),
    )


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")  # 8 tokens past a copy
def test_the_generation_modality_refuses_a_fill_and_other_targets():
    ids = torch.tensor([[11, 12, 13, 14, 15, 16]])
    with pytest.raises(TypeError, match=r"Generation does not take \['baseline'\]"):
        Explainer(baseline=0.0).explain(CopyLM(), ids, Generation(mask_id=0))
    with pytest.raises(TypeError, match="`target` must be a torchlime.targets.Continuation or None, got"):
        Explainer().explain(CopyLM(), ids, Generation(mask_id=0), target=1)
    exp = Explainer().explain(CopyLM(), ids, Generation(mask_id=0), n_samples=16)  # the default target
    assert exp.coef.shape == (1, 9, 6) and exp.info.per_token  # Continuation(): 8 tokens, each a target


def test_the_door_takes_the_modality_s_fields_the_named_call_fields_and_the_options():
    from tests.helpers.doors import check_door_form

    check_door_form(explain_generation, Generation, torch.tensor([[11, 12, 13]]))
    with pytest.raises(TypeError, match=r"explain_generation\(\) got an unexpected keyword argument 'kernal'"):
        explain_generation(CopyLM(), torch.tensor([[11, 12, 13]]), mask_id=0, kernal=0.5)


@pytest.mark.filterwarnings("ignore::torchlime.engine.quality.UnreliableExplanationWarning")  # few samples: bits only
def test_the_metrics_replay_the_rows_with_the_positions_the_explanation_used(gpt2):
    from torchlime import metrics

    ids, attn = prompts()  # left- and right-padded prompts: positions from the mask matter
    kw = dict(attention_mask=attn, mask_id=1, target=Continuation(max_new_tokens=1), n_samples=8, generator=0)
    exp = explain_generation(gpt2, ids, return_samples=True, **kw)
    rows = torch.cat([left_pad(ids, attn)[0], torch.tensor(exp.info.generated_ids)], 1)  # the rows explained
    curves = metrics.deletion(gpt2, rows, exp, steps=2, return_curves=True)
    torch.testing.assert_close(curves.curves[..., 0], exp.outputs[:, 0], atol=1e-5, rtol=0)  # nothing hidden yet
