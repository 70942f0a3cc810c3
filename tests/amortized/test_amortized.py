"""AmortizedExplainer: fit, explain as an ordinary Explanation, determinism, files, refusals, heads by modality."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import torchlime
from torchlime.amortized import DEFAULT_SAMPLES, AmortizedExplainer, AmortizedRun, ConvHead, MLPHead, TokenHead
from torchlime.metrics import deletion

D = 6
FEATS = torch.arange(D).view(1, D)


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(D, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def _fit(net: torch.nn.Module, x: torch.Tensor, **kw) -> AmortizedExplainer:
    kw = {"modality": FEATS, "n_samples": 32, "epochs": 2, "report_samples": None, **kw}
    return AmortizedExplainer.fit(net, x, **kw)


@pytest.fixture(scope="module")
def tabular():
    net = _mlp()
    x = torch.rand(96, D, generator=torch.Generator().manual_seed(1))
    return net, x, _fit(net, x)


def test_explain_is_an_ordinary_explanation(tabular):
    net, x, amort = tabular
    exp = amort.explain(x[:5])
    assert isinstance(exp, torchlime.Explanation)
    assert exp.coef.shape == (5, 1, D) and exp.intercept.shape == (5, 1)
    assert bool(exp.score.isnan().all()) and exp.samples is None
    torch.testing.assert_close(exp.local_pred, exp.intercept + exp.coef.sum(-1))
    assert exp.target[:, 0].tolist() == net(x[:5]).argmax(-1).tolist()  # the model's top class
    assert isinstance(exp.run, AmortizedRun) and exp.meta["n_samples"] == 0 and exp.meta["model_rows"] == 5
    record = exp.meta["amortized"]
    assert record["head"] == "MLPHead" and record["label_samples"] == 32 and len(record["head_digest"]) == 64
    assert record["labels"]["surrogate"].startswith("Ridge") and len(record["distance"]) == 5
    assert exp.heatmap(0).shape == (5, D) and exp.top_features(2)[0].shape == (5, 1, 2)
    assert exp[1:3].meta["amortized"]["distance"] == record["distance"][1:3]
    assert deletion(net, x[:5], exp).shape == (5, 1)
    given = amort.explain(x[:5], torch.tensor([0, 1, 2, 0, 1]))
    assert given.target[:, 0].tolist() == [0, 1, 2, 0, 1] and given.meta["model_rows"] == 0


def test_a_second_run_is_bit_identical(tabular):
    net, x, amort = tabular
    again = _fit(net, x)
    for (k, v), w in zip(amort.head.state_dict().items(), again.head.state_dict().values()):
        assert torch.equal(v, w), k
    assert torch.equal(amort.explain(x[:4]).coef, again.explain(x[:4]).coef)
    other = _fit(net, x, generator=1)
    assert not torch.equal(amort.explain(x[:4]).coef, other.explain(x[:4]).coef)


def test_labels_come_from_the_engine_per_input_whatever_the_batches(tabular):
    """Masks from (seed, index): labels made batch by batch (a DataLoader) equal those of one batch."""
    net, x, amort = tabular
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x), batch_size=40)
    batched = _fit(net, loader)
    assert batched.settings["head_digest"] == amort.settings["head_digest"]


def test_save_load_round_trip_is_bit_identical(tabular, tmp_path):
    net, x, amort = tabular
    path = tmp_path / "amort.pt"
    amort.save(path)
    assert isinstance(torch.load(path, weights_only=True), dict)
    back = AmortizedExplainer.load(path, model=net)
    a, b = amort.explain(x[:6]), back.explain(x[:6])
    for name in ("coef", "intercept", "local_pred", "target"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert a.meta["amortized"] == b.meta["amortized"]
    with pytest.raises(ValueError, match="must be given"):
        AmortizedExplainer.load(path).explain(x[:2])
    assert AmortizedExplainer.load(path).explain(x[:2], 1).coef.shape == (2, 1, D)
    with pytest.raises(ValueError, match="file written by AmortizedExplainer.save"):
        torch.save({"x": 1}, tmp_path / "other.pt")
        AmortizedExplainer.load(tmp_path / "other.pt")


class Linear(torch.nn.Module):
    """A user's head: one linear map to (B, K, F + 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(D, 3 * (D + 1))

    def forward(self, x):
        return self.lin(x).view(-1, 3, D + 1)


def test_a_users_head_is_trained_on_a_copy_and_reloaded_from_an_instance(tabular, tmp_path):
    net, x, _ = tabular
    mine = Linear()
    before = mine.lin.weight.clone()
    amort = _fit(net, x, head=mine)
    assert torch.equal(mine.lin.weight, before) and not torch.equal(amort.head.lin.weight, before)
    assert amort.settings["loss"] == "absolute"  # the relative loss is the built-in table head's default
    amort.save(tmp_path / "user.pt")
    with pytest.raises(ValueError, match="head=YourHead"):
        AmortizedExplainer.load(tmp_path / "user.pt", model=net)
    back = AmortizedExplainer.load(tmp_path / "user.pt", Linear(), model=net)
    assert torch.equal(back.explain(x[:3]).coef, amort.explain(x[:3]).coef)


def test_refit_and_bad_arguments_are_refused(tabular):
    net, x, amort = tabular
    with pytest.raises(ValueError, match="one forward of an amortized explainer"):
        amort.explain(x[:2]).refit()
    with pytest.raises(ValueError, match=r"`x` must be a \(B, 6\) tensor, got \(2, 5\)"):
        amort.explain(x[:2, :5])
    with pytest.raises(ValueError, match=r"output columns in \[0, 3\)"):
        amort.explain(x[:2], 3)
    with pytest.raises(TypeError, match="unknown keyword"):
        AmortizedExplainer.fit(net, x, modality=FEATS, epoch=2)
    with pytest.raises(ValueError, match="`holdout` must be"):
        AmortizedExplainer.fit(net, x, modality=FEATS, holdout=1.5)


def test_columns_never_labelled_are_refused():
    net = _mlp()
    x = torch.rand(40, D)
    amort = _fit(net, x, target=2, holdout=0.0)
    assert amort.labelled.tolist() == [False, False, True]
    assert amort.explain(x[:2], 2).target.tolist() == [[2], [2]]
    with pytest.raises(ValueError, match=r"\[0\] had no label in training"):
        amort.explain(x[:2], 0)


def test_features_must_be_fixed_across_inputs():
    net = _mlp()
    maps = torch.arange(D).repeat(8, 1)
    maps[3] = maps[3].flip(0)
    with pytest.raises(ValueError, match="fixed across inputs"):
        _fit(net, torch.rand(8, D), modality=maps)
    with pytest.raises(ValueError, match="Waveforms lays them on the STFT"):
        _fit(net, torch.rand(8, D), modality=torchlime.Waveforms(sample_rate=16000))


@pytest.mark.filterwarnings("ignore::torchlime.UnreliableExplanationWarning")  # a random CNN's labels
def test_heads_follow_the_modality():
    torch.manual_seed(0)
    cnn = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3, padding=1), torch.nn.Flatten(), torch.nn.Linear(2 * 64, 4))
    imgs = torch.rand(24, 1, 8, 8)
    images = torchlime.Images(segments="grid", n_segments=4)
    amort = _fit(cnn, imgs, modality=images, n_samples=None)
    exp = amort.explain(imgs[:2])
    assert isinstance(amort.head, ConvHead) and exp.coef.shape == (2, 1, 4)
    assert amort.label_samples == DEFAULT_SAMPLES and amort.settings["loss"] == "absolute"
    assert type(exp.info).__name__ == "ImagesInfo" and exp.heatmap(0).shape == (2, 1, 8, 8)
    emb = torch.nn.Sequential(torch.nn.Embedding(20, 4), torch.nn.Flatten(), torch.nn.Linear(4 * 5, 2))
    ids = torch.randint(1, 20, (24, 5))
    tokens = _fit(emb, ids, modality=torchlime.Tokens(mask_id=0))
    assert isinstance(tokens.head, TokenHead) and tokens.explain(ids[:2]).coef.shape == (2, 1, 5)
    flat = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8 * 10, 2))
    specs = _fit(flat, torch.rand(24, 8, 10), modality=torchlime.Spectrograms(time_segments=5, freq_segments=2))
    spec_exp = specs.explain(torch.rand(2, 8, 10))
    assert isinstance(specs.head, ConvHead) and spec_exp.coef.shape == (2, 1, 10)
    assert type(spec_exp.info).__name__ == "SpectrogramInfo" and spec_exp.heatmap(0).shape == (2, 8, 10)
    table = _fit(_mlp(), torch.rand(24, D), modality=torchlime.Tabular(training_data=torch.rand(50, D)))
    assert isinstance(table.head, MLPHead) and type(table.explain(torch.rand(2, D)).info).__name__ == "TabularInfo"


def test_the_global_rng_is_left_alone(tabular):
    net, x, _ = tabular
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    _fit(net, x[:20])
    assert torch.equal(torch.rand(3), expected)


def test_amortized_record_slices_with_the_explanation(tabular):
    _, x, amort = tabular
    exp = amort.explain(x[:4] * 50, fallback=False)
    assert exp.meta["quality"]["out_of_distribution"] == [[0], [1], [2], [3]]
    assert exp.meta["unreliable"].startswith("out_of_distribution")
    part = exp[2]
    assert part.meta["quality"]["out_of_distribution"] == [[0]]
    assert dataclasses.replace(part.run.amortized).distance == exp.run.amortized.distance[2:3]


def test_the_conv_heads_folded_pooling_equals_resizing_then_averaging():
    from torchlime.amortized.heads import pooling

    torch.manual_seed(0)
    head = ConvHead(2, 12, 10, 5, n_outputs=3)
    feats = torch.randint(0, 5, (12, 10))
    head.calibrate(feats, torch.zeros(2), torch.ones(2), torch.ones(()))
    low = head.trunk(torch.rand(4, 2, 12, 10)).detach()
    full = torch.nn.functional.interpolate(low, size=(12, 10), mode="bilinear", align_corners=False)
    torch.testing.assert_close(
        low.flatten(2) @ head._pooling(low.shape[-2:]), full.flatten(2) @ pooling(feats.view(-1), 5)
    )


def test_tables_train_beside_jittered_copies_labelled_by_the_engine(tabular):
    """Copies of the training inputs only, labelled at the same N from masks after the inputs' own indices."""
    from torchlime.amortized import _train
    from torchlime.amortized._labels import engine_labels, jittered
    from torchlime.amortized._options import JITTER, TABLE_COPIES

    net, x, amort = tabular
    s = amort.settings
    assert s["jittered_copies"] == TABLE_COPIES * s["trained_inputs"]  # the default for a table
    assert s["held_out_inputs"] == 10 and s["trained_inputs"] == 86  # the held-out split stays real inputs
    train_idx, _ = _train.split(96, 0.1, 0)
    rows, origin = jittered(x[train_idx], 2, JITTER, 0)
    assert rows.shape == (172, D) and torch.equal(origin[86:], torch.arange(86))
    moved = (rows - x[train_idx][origin]) / x[train_idx].std(0)
    assert 0.2 < float(moved.std()) < 0.4  # JITTER = 0.3 column deviations
    two = _fit(net, x, copies=2)
    assert two.settings["jittered_copies"] == 172
    # the copies' labels are the engine's own, their masks from seed + 1 (not the inputs' masks again)
    lab = engine_labels(net, rows, FEATS, torchlime.Explainer(), None, 32, 1, False)
    ref = torchlime.Explainer().explain(net, rows[:3], FEATS, n_samples=32, generator=1, index=torch.arange(3))
    torch.testing.assert_close(lab.values[:3, :, :-1].sum(1), ref.coef[:, 0], rtol=0, atol=0)
    none = _fit(net, x, copies=0)
    assert none.settings["jittered_copies"] == 0 and none.settings["head_digest"] != two.settings["head_digest"]
    with pytest.raises(ValueError, match="copies"):
        _fit(net, x, copies=-1)


def test_the_table_head_averages_members_trained_on_their_own_subsets(tabular):
    """forward is the members' mean; the members differ (own weights, own subsets); the bags are seeded."""
    from torchlime.amortized import _train

    _, x, amort = tabular
    head = amort.head
    assert isinstance(head, MLPHead) and head.n_members == 10 and head.w1.shape[0] == 10
    with torch.no_grad():
        each = head.member_outputs(x[:4])
        torch.testing.assert_close(head(x[:4])[0], each.mean(0))
        torch.testing.assert_close(head.member_outputs(x[:4].expand(10, 4, D)), each)
    assert not torch.equal(each[0], each[1])
    bags = _train._bags(5, 100, torch.Generator().manual_seed(0))
    again = _train._bags(5, 100, torch.Generator().manual_seed(0))
    assert torch.equal(bags, again) and bags.shape == (5, round(100 * _train.BAG))
    assert all(len(set(b.tolist())) == b.numel() for b in bags)
    assert not torch.equal(bags[0].sort()[0], bags[1].sort()[0])
