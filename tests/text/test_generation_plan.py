"""A generation call's fixed part (``text._generation_plan``): the prompt's plan kept per prompt tensor, the
greedy tokens written into one copy of the rows, one start for every row. Each is held to the path it
replaced, written out here the slow way (concatenations, per-row starts), and a kept plan to the one made
afresh, bit for bit."""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
from torch import nn

from torchlime.engine.fit import padded_as_nan
from torchlime.stages.fixed_cost import MAX_ENTRIES
from torchlime.targets.continuation import Continuation
from torchlime.text._explain import explain_generation
from torchlime.text._generation_plan import _PLANS, greedy_rows, left_pad, prompt_plan
from torchlime.text._token_args import token_features


class MixLM(nn.Module):
    """A causal LM whose logits mix every earlier token (ties are rare), its width ``vocab``."""

    def __init__(self, vocab: int = 32) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(5)))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.table[input_ids.long()]
        if attention_mask is not None:
            h = h * attention_mask.unsqueeze(-1).to(h.dtype)
        return h.cumsum(1)


def slow_rows(model, ids, attn, g, mode="replace", pad_id=0):
    """The rows as the concatenating path made them: left padding, one model call and two ``cat`` per token."""
    words = torch.arange(ids.shape[1]).expand_as(ids)
    ids, attn, _ = left_pad(ids, attn, words)
    new = []
    with torch.inference_mode():
        for _ in range(g):
            nxt = model(input_ids=ids, attention_mask=attn)[:, -1].argmax(-1).to(ids.dtype).unsqueeze(1)
            new.append(nxt)
            ids = torch.cat([ids, nxt], 1)
            attn = torch.cat([attn, torch.ones_like(nxt, dtype=attn.dtype)], 1)
    if mode == "delete":
        ids = torch.cat([torch.full_like(ids[:, :1], pad_id), ids], 1)
        attn = torch.cat([torch.zeros_like(attn[:, :1]), attn], 1)
    return ids, attn, torch.cat(new, 1).long()


CASES = {
    "one prompt": (torch.tensor([[5, 9, 3, 7, 2, 11]]), None, torch.long),
    "right padded": (
        torch.tensor([[5, 9, 3, 7], [4, 8, 0, 0]]),
        torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]]),
        torch.long,
    ),
    "int32 ids": (torch.tensor([[5, 9, 3], [6, 1, 2]]), None, torch.int32),
    "bool mask": (torch.tensor([[5, 9, 3, 1]]), torch.tensor([[0, 1, 1, 1]]).bool(), torch.long),
}


@pytest.mark.parametrize("words", [False, True])
@pytest.mark.parametrize("mode", ["replace", "delete"])
@pytest.mark.parametrize("case", list(CASES))
def test_greedy_rows_equal_the_concatenating_path(case, mode, words):
    ids, attn, dtype = CASES[case]
    ids = ids.to(dtype)
    attn_given = torch.ones_like(ids) if attn is None else attn
    special = [9, 6] if words else None  # with words, some ids are special too
    word_ids = (torch.arange(ids.shape[1]) // 2 - 1).view(1, -1) if words else None  # -1 for the first two
    plan = prompt_plan(ids, attn, word_ids, special, 4, mode, 1)
    rows, rows_attn, packed, width = greedy_rows(MixLM(), plan, 4)
    want_rows, want_attn, want_cont = slow_rows(MixLM(), ids, attn_given, 4, mode, 1)
    assert width == 32 and rows.dtype == want_rows.dtype and rows_attn.dtype == want_attn.dtype
    assert torch.equal(rows, want_rows) and torch.equal(rows_attn, want_attn)
    assert torch.equal(rows[:, -4:].long(), want_cont)
    if packed is not None:  # one prompt: the rows and mask are views of the packed copy, contiguous
        assert rows.is_contiguous() and torch.equal(packed, torch.stack([want_rows, want_attn.long()], 1))
    assert torch.equal(plan.rows[:, plan.lead + ids.shape[1] :], torch.zeros_like(want_cont, dtype=rows.dtype))
    # the rows' features as the path made them: every prompt token's position (left-padded), -1 elsewhere
    given = torch.arange(ids.shape[1]).expand_as(ids) if word_ids is None else word_ids.expand_as(ids)
    moved = left_pad(ids, attn_given, given)[2]
    rows_words = torch.cat([torch.full((ids.shape[0], plan.lead), -1), moved, torch.full((ids.shape[0], 4), -1)], 1)
    specials = torch.tensor(special or [], dtype=torch.long)
    assert torch.equal(plan.features, token_features(want_rows, want_attn, rows_words, specials))
    assert (plan.features >= 0).any() and (plan.features == -1).any()
    assert list(plan.lengths) == want_attn.long().sum(-1).tolist()


def test_a_prompt_passed_again_reuses_its_plan_until_it_is_written():
    ids = torch.tensor([[5, 9, 3, 7]])
    first = prompt_plan(ids, None, None, [9], 3, "replace", 0)
    assert prompt_plan(ids, None, None, [9], 3, "replace", 0) is first
    assert prompt_plan(ids, None, None, [3], 3, "replace", 0) is not first  # other settings: another plan
    assert prompt_plan(ids.clone(), None, None, [9], 3, "replace", 0) is not first
    ids[0, 1] = 4  # written in place: its version moved, its plan is made again
    again = prompt_plan(ids, None, None, [9], 3, "replace", 0)
    assert (
        again is not first and again.ids.tolist() == [[5, 4, 3, 7]] and again.features.tolist()[0][:4] == [0, 1, 2, 3]
    )
    assert first.features.tolist()[0][:4] == [0, -1, 2, 3]  # 9 was special


def test_the_plans_are_bounded():
    for k in range(MAX_ENTRIES + 6):
        prompt_plan(torch.tensor([[k + 2, 3]]), None, None, None, 1, "replace", 0)
    assert len(_PLANS) <= MAX_ENTRIES


def _explain(model, ids, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp = explain_generation(model, ids, n_samples=64, generator=0, batch_size=16, return_samples=True, **kw)
    info = exp.info
    return [exp.coef, exp.intercept, exp.score, exp.outputs, exp.samples, exp.features, exp.target], [
        info.input_ids,
        info.attention_mask,
        info.continuation,
        exp.run.targets.start,
    ]


@pytest.mark.parametrize(
    "kw", [dict(mask_id=0), dict(mode="delete", attention_mask=torch.tensor([[1, 1, 1, 1, 1, 0]]))]
)
def test_the_kept_plan_gives_the_first_call_s_bits(kw):
    model, ids = MixLM(), torch.tensor([[5, 9, 3, 7, 2, 11]])
    first = _explain(model, ids, **kw)
    kept = _explain(model, ids, **kw)
    fresh = _explain(model, ids.clone(), **kw)  # a new tensor: nothing kept
    for a, b, c in zip(first[0] + first[1], kept[0] + kept[1], fresh[0] + fresh[1]):
        assert torch.equal(a, b) and torch.equal(a, c)
    assert first[1][0].data_ptr() != kept[1][0].data_ptr()  # no two explanations share the rows


def test_two_threads_get_the_same_bits():
    model, ids = MixLM(), torch.tensor([[5, 9, 3, 7, 2, 11], [4, 8, 6, 1, 3, 2]])
    want = _explain(model, ids, mask_id=0)[0]
    got: list[list[torch.Tensor]] = []

    def run() -> None:
        for _ in range(2):
            got.append(_explain(model, ids, mask_id=0)[0])

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and all(torch.equal(a, b) for g in got for a, b in zip(want, g))


def test_ids_out_of_the_vocabulary_are_refused_with_a_kept_plan_too():
    ids = torch.tensor([[5, 9, 3, 40]])
    for _ in range(2):
        with pytest.raises(ValueError, match="`input_ids` must be in"):
            explain_generation(MixLM(64), ids, mask_id=0, vocab_size=32, n_samples=16)
    # a continuation drawn from logits wider than the vocabulary is read: 40 is generated here
    wide = MixLM(64)
    with torch.no_grad():
        wide.table.zero_()
        wide.table[:, 40] = 1.0
    for _ in range(2):
        with pytest.raises(ValueError, match=r"`input_ids` must be in \[0, 32\).*\[40\]"):
            explain_generation(wide, torch.tensor([[5, 9, 3, 7]]), mask_id=0, vocab_size=32, n_samples=16)


@torch.no_grad()
def test_one_start_binds_as_a_start_per_row_does():
    lm = MixLM()
    rows = torch.tensor([[5, 9, 3, 7, 2, 11], [4, 8, 6, 1, 3, 2]])
    cont = rows[:, 4:]
    reference = lm(rows)
    for per_token in (True, False):
        one = Continuation(per_token=per_token).prepared(cont, 4).bind(reference, 2)
        each = Continuation(per_token=per_token).prepared(cont, torch.tensor([4, 4])).bind(reference, 2)
        assert torch.equal(one.labels, each.labels) and torch.equal(one.valid, each.valid)
        assert torch.equal(one.info.start, each.info.start)
        for r in (torch.tensor([0]), torch.tensor([1, 0, 1])):
            out = lm(rows[r])
            assert torch.equal(one.score(out, r), each.score(out, r))
    with pytest.raises(ValueError, match="`start` must be >= 1"):
        Continuation().prepared(cont, 0)


def test_padded_scores_are_nan_where_no_target_exists():
    score = torch.randn(3, 4, dtype=torch.float64)
    valid = torch.rand(3, 4, generator=torch.Generator().manual_seed(0)) > 0.5
    got = padded_as_nan(score, valid)
    assert torch.equal(got.isnan(), ~valid) and torch.equal(got[valid], score[valid]) and got.dtype == score.dtype
    assert padded_as_nan(score, None) is score


def test_an_empty_prompt_and_a_padding_id_out_of_the_vocabulary_are_refused():
    ids, mask = torch.tensor([[5, 9, 3], [4, 8, 6]]), torch.tensor([[1, 1, 0], [0, 0, 0]])
    for _ in range(2):
        with pytest.raises(ValueError, match="at least one token in every prompt"):
            explain_generation(MixLM(), ids, attention_mask=mask, mask_id=0, n_samples=16)
    for _ in range(2):  # the padding column holds pad_id: read with the rows, as the prompts' ids are
        with pytest.raises(ValueError, match=r"`input_ids` must be in \[0, 32\).*40"):
            explain_generation(MixLM(32), ids, mode="delete", pad_id=40, vocab_size=32, n_samples=16)


def test_special_ids_as_an_iterator_are_read_once_for_the_plan_and_the_tokens():
    ids = torch.tensor([[5, 9, 3, 7, 2]])
    once = _explain(MixLM(), ids, mask_id=0, special_ids=iter([9]))
    listed = _explain(MixLM(), ids, mask_id=0, special_ids=[9])
    assert all(torch.equal(a, b) for a, b in zip(once[0], listed[0]))
    assert once[0][5].tolist()[0][:5] == [0, -1, 1, 2, 3]  # the features: 9 is special
