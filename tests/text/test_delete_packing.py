"""Delete-mode rows packed by length, and the CPU chunk rule for token rows.

"delete" sorts a pass by each row's kept length and cuts every chunk to its longest row; a model
that respects the attention mask gives the same outputs as on the full-length rows (the metrics'
replay path, which has no keys, still builds those).
"""

from __future__ import annotations

import pytest
import torch

from torchlime.engine import Explainer
from torchlime.metrics import deletion
from torchlime.stages.forward import chunking
from torchlime.stages.forward.chunking import ChunkPlan, cpu_rule, sequence_length
from torchlime.stages.perturb.blend import Chunk, OrderedPerturbFn
from torchlime.text import explain_text, explain_tokens
from torchlime.text._packing import deleted_length, head_rows, join_outputs
from torchlime.text._tokens import Tokens
from torchlime.text.edits import DeleteTokens, PackedDeleteTokens, make_perturb_fn

from tests.helpers.syncs import count_syncs
from tests.helpers.text import CLS, PAD, SEP, batch_with_padding

transformers = pytest.importorskip("transformers")
pytest.importorskip("transformers.models.bert.modeling_bert")  # imported once, when the module is collected
VOCAB = 40
L = 12


def tiny_bert_config() -> object:
    return transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        num_labels=3,
    )


class RightBert(torch.nn.Module):
    """A BERT classifier (pooled [CLS], positions 0..): right-padded inputs."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.bert = transformers.BertForSequenceClassification(tiny_bert_config()).eval()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).logits


class LeftBert(torch.nn.Module):
    """A BERT encoder read at its last position, positions from the mask: left-padded inputs (decoder-like)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.bert = transformers.BertModel(tiny_bert_config(), add_pooling_layer=False).eval()
        self.head = torch.nn.Linear(16, 3)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pos = (attention_mask.long().cumsum(1) - 1).clamp_min(0)
        hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask, position_ids=pos).last_hidden_state
        return self.head(hidden[:, -1])


class TinyEncoder(torch.nn.Module):
    """One self-attention layer over token and position embeddings, read at [CLS]: respects the mask."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb, self.pos = torch.nn.Embedding(VOCAB, 16), torch.nn.Embedding(32, 16)
        self.layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(16, 3)
        self.eval()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        x = self.emb(input_ids) + self.pos(torch.arange(input_ids.shape[1]))
        return self.head(self.layer(x, src_key_padding_mask=attention_mask == 0)[:, 0])


class MaskedMean(torch.nn.Module):
    """Mean of the attended tokens' embeddings: respects the mask, no host synchronisation."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 3)
        self.emb.weight.data = torch.randn(VOCAB, 3, generator=torch.Generator().manual_seed(0))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        w = attention_mask.float().unsqueeze(-1)
        return (self.emb(input_ids) * w).sum(1) / w.sum(1).clamp_min(1.0)


class Shapes(torch.nn.Module):
    """Records every chunk's ids and mask."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model, self.seen = model, []

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        self.seen.append((input_ids.clone(), attention_mask.clone()))
        return self.model(input_ids, attention_mask)


class PaddedTokens(Tokens):
    _pack_rows = False  # every row at full length: the path before packing


def batch(left: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Two texts of 12 and 7 tokens ([CLS] ... [SEP]), padded on the right or the left."""
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(4, VOCAB, (2, L), generator=g)
    lengths = torch.tensor([L, 7])
    attn = (torch.arange(L) < lengths.unsqueeze(1)).long()
    ids = torch.where(attn.bool(), ids, PAD)
    ids[:, 0] = CLS
    ids[torch.arange(2), lengths - 1] = SEP
    if left:  # the same texts, padding moved to the front
        shift = (L - lengths).unsqueeze(1)
        cols = (torch.arange(L) - shift) % L
        ids, attn = ids.gather(1, cols), attn.gather(1, cols)
    return ids, attn


DELETE = dict(special_ids=[CLS, SEP], mode="delete", pad_id=PAD)
RUN = dict(n_samples=64, generator=0)


def delete_kw(**kw: object) -> dict:
    return dict(**DELETE, **RUN, **kw)


@pytest.mark.parametrize("left", [False, True], ids=["right", "left"])
def test_trimmed_rows_score_as_the_padded_rows(left):
    model = LeftBert() if left else RightBert()
    ids, attn = batch(left)
    rec = Shapes(model)
    kw = dict(attention_mask=attn, batch_size=16, return_samples=True, **delete_kw())
    exp = explain_tokens(rec, ids, **kw)
    widths = [c[0].shape[1] for c in rec.seen]
    assert min(widths) < L and max(widths) <= L  # the chunks were cut
    # the same masks at full length: the replay path (no keys) and the engine without packing
    full = exp.perturbation.rows(exp.samples)
    assert full.shape == (2 * 64, 2, L)
    with torch.no_grad():
        out = model(full[:, 0], full[:, 1]).view(2, 64, -1)
    got = exp.outputs[..., 0]
    want = out.gather(2, exp.target[:, :1].unsqueeze(1).expand(-1, 64, -1))[..., 0]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    modality = PaddedTokens(attention_mask=attn, **DELETE)
    padded = Explainer(batch_size=16).explain(model, ids, modality, return_samples=True, **RUN)
    assert torch.equal(padded.samples, exp.samples)
    torch.testing.assert_close(padded.outputs, exp.outputs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(padded.coef, exp.coef, atol=1e-4, rtol=1e-4)


def test_a_chunk_run_as_two_calls_keeps_the_models_output_type():
    model = RightBert().bert  # a SequenceClassifierOutput, read by `output`
    ids, attn = batch(False)
    kinds = []

    def logits(out):
        kinds.append(type(out))
        return out.logits

    kw = dict(attention_mask=attn, batch_size=16, **delete_kw())
    exp = explain_tokens(model, ids, model_inputs="keywords", output=logits, **kw)
    assert set(kinds) == {transformers.modeling_outputs.SequenceClassifierOutput}
    torch.testing.assert_close(exp.coef, explain_tokens(RightBert(), ids, **kw).coef)
    parts = [kinds[0](logits=torch.ones(2, 3)), kinds[0](logits=torch.zeros(5, 3))]
    joined = join_outputs(parts)
    assert isinstance(joined, kinds[0]) and torch.equal(joined.logits, torch.cat([parts[0].logits, parts[1].logits]))
    assert head_rows([12, 7, 3, 4, 4]) == 2 and head_rows([12, 11, 11]) == 0  # apart only when it saves columns


def test_same_seed_same_bits():
    ids, attn = batch(False)
    model = TinyEncoder()
    a = explain_tokens(model, ids, attention_mask=attn, batch_size=16, **delete_kw())
    b = explain_tokens(model, ids, attention_mask=attn, batch_size=16, **delete_kw())
    assert torch.equal(a.coef, b.coef) and torch.equal(a.intercept, b.intercept)


@pytest.mark.parametrize("left", [False, True], ids=["right", "left"])
def test_the_model_sees_no_column_beyond_the_chunks_longest_row(left):
    ids, attn = batch(left)
    rec = Shapes(MaskedMean())
    explain_tokens(rec, ids, attention_mask=attn, batch_size=8, **delete_kw())
    assert sum(c[0].shape[0] for c in rec.seen) == 2 * 64
    widths = []
    for seen_ids, seen_attn in rec.seen:
        n = seen_attn.sum(1)
        widths.append(seen_ids.shape[1])
        assert seen_ids.shape[1] == int(n.max())  # as long as its longest row, no longer
        side = torch.arange(seen_ids.shape[1]).flip(0) if left else torch.arange(seen_ids.shape[1])
        assert torch.equal(seen_attn, (side < n.unsqueeze(1)).long())  # tokens on the unpadded side
        assert bool((seen_ids[seen_attn == 0] == PAD).all())
    assert widths[0] == L and widths[1:] == sorted(widths[1:])  # the inputs first, then by length
    assert rec.seen[0][0].shape[0] == 2  # the unperturbed inputs run apart from the shorter rows of their chunk


def word_tokenizer() -> object:
    """A word-level fast tokenizer: [PAD] 0, [CLS] 1, [SEP] 2, [MASK] 3, [UNK] 4, then w0 .. w29."""
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {w: i for i, w in enumerate(["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]", *(f"w{i}" for i in range(30))])}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tok.post_processor = tokenizers.processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    names = dict(pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]", unk_token="[UNK]")
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **names)


def test_explain_text_with_a_tokenizer_packs_its_rows(monkeypatch):
    texts = [" ".join(f"w{i}" for i in range(12)), "w3 w9 w4 w20"]
    kw = dict(tokenizer=word_tokenizer(), n_samples=32, generator=0, batch_size=8, return_samples=True)
    rec = Shapes(MaskedMean())
    exp = explain_text(rec, texts, **kw)  # bow: "delete"
    assert exp.meta["mode"] == "delete"
    widths = [c[0].shape[1] for c in rec.seen]
    assert min(widths) < 14 and all(w == int(c[1].sum(1).max()) for w, c in zip(widths, rec.seen))
    monkeypatch.setattr(Tokens, "_pack_rows", False)
    full = Shapes(MaskedMean())
    padded = explain_text(full, texts, **kw)
    assert {c[0].shape[1] for c in full.seen} == {14}
    torch.testing.assert_close(exp.outputs, padded.outputs, atol=1e-6, rtol=1e-6)


def test_order_key_is_the_deleted_length():
    ids, attn = batch_with_padding()  # 10 columns, 10, 7 and 8 tokens
    packed = torch.stack([ids, attn], 1)
    fn = make_perturb_fn("delete", None, PAD, attention_mask=attn)
    assert isinstance(fn, PackedDeleteTokens) and isinstance(fn, OrderedPerturbFn)
    assert not isinstance(make_perturb_fn("delete", None, PAD), OrderedPerturbFn)  # no mask: full length
    index = torch.where(attn.bool(), torch.arange(10) % 4, 4).unsqueeze(1)  # column 4: always kept
    masks = torch.tensor([[True, False, True, True, True], [False, True, True, True, True], [False] * 4 + [True]])
    rows = torch.arange(3)
    keys = fn.order_key(index, masks, rows)
    assert torch.equal(keys, (masks.gather(1, index[:, 0]) & attn.bool()).sum(1))
    chunk = Chunk(masks, rows, torch.ones(3, dtype=torch.long), 0, -1, keys=tuple(keys.tolist()))
    cut = PackedDeleteTokens(attn, PAD, split=False)(packed, packed, index, chunk)
    full = fn(packed, packed, index, chunk._replace(keys=None))  # no keys: full length
    assert torch.equal(full, DeleteTokens(PAD)(packed, packed, index, chunk))
    width = max(keys.tolist())
    assert width < 10 and cut.shape == (3, 2, width) and full.shape == (3, 2, 10)
    assert torch.equal(cut, full[..., :width]) and bool((full[..., width:] == 0).all())
    # the keys fall (7, 5, 0): the first two rows run apart from the last, each part cut to its own longest row
    assert keys.tolist() == [7, 5, 0] and head_rows(chunk.keys) == 2
    head, rest = fn(packed, packed, index, chunk)
    assert torch.equal(head, full[:2, :, :7]) and torch.equal(rest, full[2:, :, :1])


def test_a_row_kept_whole_keeps_its_extent():
    attn = torch.tensor([[0, 1, 1, 0, 1, 0]])  # a hole: a whole row is not re-packed
    whole, cut = torch.ones(1, 6, dtype=torch.bool), torch.tensor([[True, True, False, True, True, True]])
    assert deleted_length(attn, whole, torch.tensor(False)).tolist() == [5]
    assert deleted_length(attn, whole, torch.tensor(True)).tolist() == [5]
    assert deleted_length(attn, cut, torch.tensor(False)).tolist() == [2]


def test_no_host_sync_per_chunk():
    ids, attn = batch(False)
    model = MaskedMean()
    counts = []
    explain_tokens(model, ids, attention_mask=attn, batch_size=400, **delete_kw())  # the ids' checks: kept after
    for size in (400, 16):  # one chunk vs eight
        uploads = []
        with count_syncs(uploads) as ops:
            explain_tokens(model, ids, attention_mask=attn, batch_size=size, **delete_kw())
        counts.append((len(ops), len(uploads)))
    assert counts[0] == counts[1], counts


def test_the_metrics_replay_full_length_rows():
    ids, attn = batch(False)
    model = TinyEncoder()
    exp = explain_tokens(model, ids, attention_mask=attn, batch_size=16, return_samples=True, **delete_kw())
    curves = deletion(model, ids, exp, return_curves=True).curves
    assert curves.shape[:2] == (2, 1) and bool(torch.isfinite(curves).all())
    torch.testing.assert_close(curves[..., 0], exp.outputs[:, 0], atol=1e-5, rtol=1e-5)  # nothing hidden yet


def test_a_continuation_target_gets_full_length_rows():
    from torchlime.targets import Continuation

    fn = make_perturb_fn("delete", None, PAD)
    assert isinstance(fn, DeleteTokens) and not isinstance(fn, PackedDeleteTokens)
    ids, attn = batch(True)
    call_target = Continuation().prepared(ids[:, -1:], torch.full((2,), L - 1))
    from torchlime.engine import Call, Config

    prepared = Tokens(attention_mask=attn, mode="delete").prepare(MaskedMean(), ids, Config(), Call(target=call_target))
    assert not isinstance(prepared.call.perturb_fn, OrderedPerturbFn)


def old_rule(signature) -> int:
    return chunking._pow2_floor(
        min(chunking.MAX_CHUNK, max(1, chunking.CPU_CHUNK_BYTES // chunking.row_bytes(signature)))
    )


def test_the_cpu_rule_bounds_token_rows_and_leaves_images_alone():
    tokens = ((2, 96), "torch.int64", False, False)
    assert sequence_length(tokens) == 96 and sequence_length(("tokens", 96)) == 96
    assert cpu_rule(tokens) * 96 <= chunking.CPU_CHUNK_TOKENS < 2 * cpu_rule(tokens) * 96
    assert cpu_rule(tokens) < old_rule(tokens) == 4096
    assert cpu_rule(((2, 8192), "torch.int32", False, False)) == 1
    assert ChunkPlan(MaskedMean(), tokens, torch.device("cpu"), None).rule == cpu_rule(tokens)
    others = [
        ((3, 224, 224), "torch.float32", False, True),
        ((3, 64, 64), "torch.uint8", False, True),
        ((3, 224, 224), "torch.bfloat16", True, True),
        ((1, 16000), "torch.float32", False, True),
        ((40,), "torch.int64", False, False),  # words' pieces for a function over strings
        ((2, 96), "torch.float32", False, True),  # a float (2, L) row is not token ids
        ((2, 96), "torch.bool", False, True),
    ]
    for sig in others:
        assert sequence_length(sig) is None and cpu_rule(sig) == old_rule(sig), sig


def test_the_default_rule_chunks_token_rows():
    ids = torch.randint(4, VOCAB, (1, 96))
    rec = Shapes(MaskedMean())
    explain_tokens(rec, ids, mode="replace", mask_id=3, n_samples=300, model_inputs="positional")
    rule = cpu_rule(((2, 96), "torch.int64", False, False))
    assert max(c[0].shape[0] for c in rec.seen) == rule and sum(c[0].shape[0] for c in rec.seen) == 300
