"""Bad text inputs: errors that name the argument, what was expected and what came."""

from __future__ import annotations

import pytest
import torch

from torchlime.text import explain_tokens
from torchlime.text.infill import Infiller
from torchlime.text.proximity import HybridKernel

from tests.helpers.text import CLS, MASK, SEP, PositionBag, ToyMLM, batch_with_padding


@pytest.fixture
def case():
    ids, attn = batch_with_padding()
    return PositionBag(), ids, attn


def test_non_integer_ids(case):
    model, ids, attn = case
    with pytest.raises(
        TypeError,
        match=r"`input_ids` must have an integer dtype \(e\.g\. torch\.long\), "
        r"got torch\.float32",
    ):
        explain_tokens(model, ids.float(), attention_mask=attn, mask_id=MASK)
    with pytest.raises(TypeError, match=r"`input_ids` must be a torch\.Tensor, got list"):
        explain_tokens(model, ids.tolist(), mask_id=MASK)
    with pytest.raises(ValueError, match=r"`input_ids` must have shape \(B, L\), got shape \(10,\)"):
        explain_tokens(model, ids[0], mask_id=MASK)


def test_ids_outside_the_vocabulary(case):
    model, ids, attn = case
    bad = ids.clone()
    bad[1, 2] = 40
    with pytest.raises(
        ValueError,
        match=r"`input_ids` must be in \[0, 40\) \(the model's vocabulary size\), "
        r"got ids \[40\] \(min 0, max 40\)",
    ):
        explain_tokens(model, bad, attention_mask=attn, mask_id=MASK)  # inferred from the embedding
    with pytest.raises(ValueError, match=r"`input_ids` must be in \[0, 20\)"):
        explain_tokens(lambda i, m: PositionBag()(i, m), ids, attention_mask=attn, mask_id=MASK, vocab_size=20)
    with pytest.raises(ValueError, match=r"`mask_id` must be in \[0, 40\) \(the model's vocabulary size\), got 99"):
        explain_tokens(model, ids, attention_mask=attn, mask_id=99)


def test_attention_mask_shape_and_dtype(case):
    model, ids, attn = case
    with pytest.raises(
        ValueError,
        match=r"`attention_mask` must have the shape of `input_ids` \(3, 10\), "
        r"got \(3, 9\)",
    ):
        explain_tokens(model, ids, attention_mask=attn[:, :9], mask_id=MASK)
    with pytest.raises(TypeError, match=r"`attention_mask` must be bool or integer \(0/1\), got torch\.float32"):
        explain_tokens(model, ids, attention_mask=attn.float(), mask_id=MASK)


def test_row_without_perturbable_tokens(case):
    model, ids, attn = case
    ids = ids.clone()
    ids[1, 1:6] = CLS  # row 1: only special tokens and padding left
    with pytest.raises(
        ValueError,
        match=r"at least 2 features to explain; `input_ids` rows \[1\] have fewer "
        r"\(.*special tokens and padding, are never perturbed\)",
    ):
        explain_tokens(model, ids, attention_mask=attn, special_ids=[CLS, SEP], mask_id=MASK)
    attn = attn.clone()
    attn[2] = 0
    with pytest.raises(ValueError, match=r"`input_ids` rows \[1, 2\] have fewer"):
        explain_tokens(model, ids, attention_mask=attn, special_ids=[CLS, SEP], mask_id=MASK)


def test_mask_id_required(case):
    model, ids, attn = case
    with pytest.raises(ValueError, match=r"mode='replace' needs `mask_id` .* got None"):
        explain_tokens(model, ids, attention_mask=attn)
    with pytest.raises(ValueError, match=r"mode='infill' needs `mask_id`"):
        explain_tokens(model, ids, attention_mask=attn, mode="infill", infill=ToyMLM())
    explain_tokens(model, ids, attention_mask=attn, mode="delete", n_samples=10)  # delete needs none


def test_other_bad_arguments(case):
    model, ids, attn = case
    with pytest.raises(ValueError, match=r"`mode` must be one of \['replace', 'delete', 'infill'\], got 'drop'"):
        explain_tokens(model, ids, mode="drop", mask_id=MASK)
    with pytest.raises(ValueError, match=r"mode='infill' needs `infill`"):
        explain_tokens(model, ids, attention_mask=attn, mode="infill", mask_id=MASK)
    with pytest.raises(ValueError, match=r"`word_ids` must have shape \(3, 10\) or \(1, 10\), got \(3, 9\)"):
        explain_tokens(model, ids, word_ids=ids[:, :9], mask_id=MASK)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'baseline'"):  # hidden tokens come from `mode`
        explain_tokens(model, ids, mask_id=MASK, baseline=0.0)
    with pytest.raises(ValueError, match=r"`model_inputs` must be one of"):
        explain_tokens(model, ids, mask_id=MASK, model_inputs="kwargs")
    with pytest.raises(TypeError, match=r"`mask_id` must be an int token id, got float 3\.0"):
        explain_tokens(model, ids, mask_id=3.0)
    with pytest.raises(ValueError, match=r"`objective` 'boundary' needs protocol='single', got 'joint'"):
        Infiller(ToyMLM(), objective="boundary")
    with pytest.raises(TypeError, match=r"`synonym_threshold` needs an embedding"):
        Infiller(lambda i, m: None)
    with pytest.raises(ValueError, match=r"`alpha` must be in \[0, 1\], got 1\.5"):
        HybridKernel(torch.zeros(4, 2), alpha=1.5)


def test_bad_mlm_output(case):
    model, ids, attn = case
    bad = Infiller(lambda i, m: torch.zeros(i.shape[0], 40), synonym_threshold=None)
    with pytest.raises(ValueError, match=r"the masked LM must return logits of shape \(\d+, 10, V\)"):
        explain_tokens(model, ids, attention_mask=attn, mode="infill", mask_id=MASK, infill=bad, n_samples=8)


def test_input_space_kernels_are_refused_for_tokens():
    from torchlime.text import explain_tokens

    ids = torch.tensor([[5, 6, 7, 8]])
    with pytest.raises(ValueError, match="`kernel` must measure distances on the masks .* compare token ids"):
        explain_tokens(
            lambda t: (t == 7).float().sum(1, keepdim=True), ids, mask_id=0, n_samples=8, kernel="wasserstein"
        )
    with pytest.raises(ValueError, match=r"`kernel` \(from preset='captum'\) must measure .* or a HybridKernel"):
        explain_tokens(
            lambda t: (t == 7).float().sum(1, keepdim=True), ids, mask_id=0, n_samples=8, preset="captum"
        )  # the preset's kernel is an input-space one
