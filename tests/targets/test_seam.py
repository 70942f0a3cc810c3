"""The engine's seam for structured targets: raw outputs cut and joined by rows, ragged T kept through the
explanation, its saving and slicing, the data-set runner and its resume fingerprint."""

from __future__ import annotations

import dataclasses
import types
from typing import NamedTuple

import pytest
import torch

import torchlime
from torchlime.dataset import explain_dataset, load_results
from torchlime.dataset._describe import describe_value
from torchlime.targets import Boxes, Region, Similarity, cat_rows, take_rows

CELLS = torch.arange(64).view(1, 1, 8, 8) // 16  # 4 bands of rows


def seg_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Conv2d(3, 4, 1)


def images() -> torch.Tensor:
    x = torch.rand(6, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    x[3:] *= 0.1  # darker images: the model predicts fewer classes there
    return x


@pytest.mark.parametrize(
    "out",
    [
        torch.arange(12.0).view(6, 2),
        [{"boxes": torch.rand(k, 4), "labels": torch.arange(k)} for k in (1, 0, 2, 3, 1, 2)],
        (torch.rand(6, 3), torch.rand(6, 2, 2)),
        {"out": torch.rand(6, 4, 2, 2), "aux": torch.rand(6, 1)},
    ],
    ids=["tensor", "detections", "tuple", "dict"],
)
def test_rows_cut_and_joined_give_the_output_back(out):
    parts = [take_rows(out, 0, 2), take_rows(out, 2, 5), take_rows(out, 5, 6)]
    joined = cat_rows(parts)
    flat = lambda o: (  # noqa: E731
        [o] if isinstance(o, torch.Tensor) else [t for v in (o.values() if isinstance(o, dict) else o) for t in flat(v)]
    )
    assert all(torch.equal(a, b) for a, b in zip(flat(joined), flat(out)))


@dataclasses.dataclass
class _Logits:
    logits: torch.Tensor


class _Pair(NamedTuple):
    logits: torch.Tensor
    aux: torch.Tensor


def _records(o: object) -> object:
    if isinstance(o, _Pair):
        return ("pair", o.logits, o.aux)
    if isinstance(o, _Logits):
        return ("dataclass", o.logits)
    return ("namespace", o.logits) if isinstance(o, types.SimpleNamespace) else o


@pytest.mark.parametrize(
    "wrap",
    [lambda t: _Logits(t), lambda t: _Pair(t, t + 1), lambda t: types.SimpleNamespace(logits=t, note="kept")],
    ids=["dataclass", "namedtuple", "namespace"],
)
def test_records_are_cut_and_joined_field_by_field(wrap):
    out = wrap(torch.arange(12.0).view(6, 2))
    part = take_rows(out, 2, 5)
    assert type(part) is type(out) and torch.equal(part.logits, out.logits[2:5])
    joined = cat_rows([take_rows(out, 0, 2), part, take_rows(out, 5, 6)])
    kind, *tensors = _records(joined)
    assert type(joined) is type(out) and all(torch.equal(a, b) for a, b in zip(tensors, _records(out)[1:]))
    if kind == "namespace":
        assert joined.note == "kept"


@dataclasses.dataclass
class _Tempered:
    logits: torch.Tensor
    temperature: dataclasses.InitVar[float] = 2.0

    def __post_init__(self, temperature: float) -> None:
        self.logits = self.logits / temperature  # runs once, when the model builds its output


def test_records_are_not_built_again_and_mappings_keep_their_type():
    import collections

    out = _Tempered(torch.full((4, 2), 8.0))
    parts = [take_rows(out, 0, 1), take_rows(out, 1, 4)]
    assert torch.equal(cat_rows(parts).logits, out.logits)  # 4.0: __post_init__ did not divide again
    held = collections.UserDict({"logits": torch.arange(8.0).view(4, 2)})  # as BatchEncoding is
    part = take_rows(held, 1, 3)
    assert type(part) is collections.UserDict and torch.equal(part["logits"], held["logits"][1:3])
    nested = types.SimpleNamespace(pair=(torch.arange(4.0), torch.ones(4, 1)))
    assert [t.shape[0] for t in take_rows(nested, 1, 3).pair] == [2, 2]  # containers on an object are cut too


def _region_model(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(x.shape[0], 2, 4, 4)
    out[:, 1] = 10 * x[:, :, :4].mean((1, 2, 3)).view(-1, 1, 1)  # class 1 reads the top band only
    return out


@pytest.mark.parametrize(
    "wrap",
    [lambda t: {"logits": t}, lambda t: _Logits(t), lambda t: _Pair(t, t), lambda t: types.SimpleNamespace(logits=t)],
    ids=["dict", "dataclass", "namedtuple", "namespace"],
)
def test_a_record_output_scores_each_row_as_a_tensor_output_does(wrap):
    x = images()[:2]
    kw = dict(target=Region(classes=[1]), n_samples=64, generator=0, batch_size=40)  # a chunk holds both kinds of row
    plain = torchlime.explain(_region_model, x, CELLS, **kw)
    wrapped = torchlime.explain(lambda v: wrap(_region_model(v)), x, CELLS, **kw)
    assert torch.equal(wrapped.coef, plain.coef)
    assert plain.coef[:, 0].argmax(-1).tolist() == [0, 0]  # the planted band


def test_an_output_whose_rows_cannot_be_cut_is_refused_by_name():
    holder = type("Holder", (), {})  # the tensor lives on the class: no instance attribute to cut

    def model(v: torch.Tensor) -> object:
        holder.logits = _region_model(v)
        return holder()

    with pytest.raises(ValueError, match=r"Region read a tensor of shape \(\d+, 2, 4, 4\).*`output=`"):
        torchlime.explain(model, images()[:2], CELLS, target=Region(classes=[1]), n_samples=64, generator=0)


def test_ragged_targets_are_padded_marked_and_kept():
    exp = torchlime.explain(seg_model(), images(), CELLS, target=Region(), n_samples=64, generator=0)
    valid = exp.target_valid
    assert valid is not None and valid.shape == exp.target.shape and not valid.all()
    assert torch.equal(exp.target == -1, ~valid)
    assert (exp.coef[~valid] == 0).all() and (exp.intercept[~valid] == 0).all()
    assert exp.score[~valid].isnan().all() and exp.score[valid].isfinite().all()
    assert f"over the {int(valid.sum())} real targets" in repr(exp)
    idx, values = exp.top_features(2, by="abs")
    assert (idx[~valid] == -1).all() and (values[~valid] == 0).all() and (idx[valid] >= 0).all()
    part = exp[3:5]
    assert torch.equal(part.target_valid, valid[3:5])


def test_save_and_load_keep_the_valid_targets(tmp_path):
    exp = torchlime.explain(seg_model(), images(), CELLS, target=Region(), n_samples=32, generator=0)
    exp.save(tmp_path / "e.pt")
    back = torchlime.Explanation.load(tmp_path / "e.pt")
    assert torch.equal(back.target_valid, exp.target_valid) and back.meta["targets"]["kind"] == "region"


def test_a_data_set_equals_one_call_and_pads_targets_across_shards(tmp_path):
    x = images()
    one = torchlime.explain(seg_model(), x, CELLS, target=Region(), n_samples=32, generator=0, index=torch.arange(6))
    explain_dataset(
        seg_model(),
        x,
        tmp_path / "out",
        modality=CELLS,
        call=torchlime.Call(target=Region(), n_samples=32, generator=0),
        inputs_per_step=2,
        shard_size=4,
        progress=False,
    )
    res = load_results(tmp_path / "out").load()
    assert torch.equal(res.target, one.target) and torch.equal(res.target_valid, one.target_valid)
    # the same masks; the model and the region reduction may round differently at other batch sizes
    assert torch.allclose(res.coef, one.coef, atol=1e-5) and (res.coef[~res.target_valid] == 0).all()


def test_another_target_is_another_run(tmp_path):
    assert describe_value(Boxes(score_threshold=0.3)) != describe_value(Boxes(score_threshold=0.5))
    assert describe_value(Similarity(torch.ones(2, 3))) != describe_value(Similarity(torch.zeros(2, 3)))
    kw = dict(modality=CELLS, progress=False)
    explain_dataset(seg_model(), images(), tmp_path / "out", call=torchlime.Call(target=Region(), n_samples=16), **kw)
    with pytest.raises(ValueError, match="other arguments"):
        other = torchlime.Call(target=Region(reduce="sum"), n_samples=16)
        explain_dataset(seg_model(), images(), tmp_path / "out", call=other, **kw)


def test_a_target_of_another_kind_is_named():
    with pytest.raises(TypeError, match=r"a torchlime.targets object \(Boxes, Region, Similarity\)"):
        torchlime.explain(seg_model(), images(), CELLS, target=object(), n_samples=16)


def test_metrics_score_a_structured_target_as_the_explanation_did():
    from torchlime.metrics import GaussianNoise, deletion, faithfulness_correlation, infidelity, label_flip

    x = images()
    exp = torchlime.explain(seg_model(), x, CELLS, target=Region(), n_samples=64, generator=0)
    auc = deletion(seg_model(), x, exp)
    valid = exp.target_valid
    assert auc.shape == exp.target.shape and torch.isfinite(auc[valid]).all() and auc[~valid].isnan().all()
    # the first point of each curve is the unperturbed input: the score the explanation's row 0 had
    curves = deletion(seg_model(), x, exp, return_curves=True).curves
    row0 = torchlime.explain(seg_model(), x, CELLS, target=Region(), n_samples=64, return_samples=True).outputs[:, 0]
    assert torch.allclose(curves[..., 0][valid], row0[valid], atol=1e-5)
    corr = faithfulness_correlation(seg_model(), x, exp, n_subsets=8)
    assert corr[~valid].isnan().all()
    assert infidelity(seg_model(), x, exp, perturbations=GaussianNoise(n=4))[~valid].isnan().all()
    part = exp[3:5]  # a slice keeps its scorer, renumbered
    assert torch.allclose(deletion(seg_model(), x[3:5], part).nan_to_num(), auc[3:5].nan_to_num(), atol=1e-6)
    with pytest.raises(ValueError, match="label_flip compares the top class"):
        label_flip(seg_model(), x, exp, k=1)


def test_metrics_select_the_output_a_structured_explanation_selected():
    from torchlime.metrics import deletion

    x, plain = images(), seg_model()
    boxed = lambda v: {"seg": plain(v), "aux": v.mean()}  # noqa: E731  the target reads "seg"
    exp = torchlime.explain(boxed, x, CELLS, target=Region(), output="seg", n_samples=64, generator=0)
    same = torchlime.explain(plain, x, CELLS, target=Region(), n_samples=64, generator=0)
    torch.testing.assert_close(deletion(boxed, x, exp), deletion(plain, x, same), equal_nan=True, rtol=1e-6, atol=1e-6)


def test_stability_leaves_padded_targets_out():
    from torchlime.metrics import jaccard_topk, kendall_w

    runs = [torchlime.explain(seg_model(), images(), CELLS, target=Region(), n_samples=64, generator=g) for g in (0, 1)]
    valid = runs[0].target_valid
    for values in (jaccard_topk(runs, 2), kendall_w(runs)):
        assert values[~valid].isnan().all() and not values[valid].isnan().any()  # no phantom J = 1 on padding


def test_metrics_refuse_a_structured_explanation_that_lost_its_scorer(tmp_path):
    from torchlime.metrics import deletion

    exp = torchlime.explain(seg_model(), images(), CELLS, target=Region(), n_samples=32)
    exp.save(tmp_path / "e.pt")
    with pytest.raises(ValueError, match="has lost its scorer"):
        deletion(seg_model(), images(), torchlime.Explanation.load(tmp_path / "e.pt"))


def test_notebook_shows_every_valid_target():
    exp = torchlime.explain(seg_model(), images(), CELLS, target=Region(), n_samples=32)
    page = exp[3:4]._repr_html_()  # one image whose prediction holds fewer classes than the widest
    assert page.count("<figure") == int(exp.target_valid[3].sum()) and "class " in page

    def detector(x):
        s = x[:, :, :4, :4].mean((1, 2, 3))
        return [{"boxes": torch.tensor([[0.0, 0, 4, 4]]), "labels": torch.tensor([1]), "scores": v[None]} for v in s]

    boxes = torchlime.explain(detector, images() + 1, CELLS, target=Boxes(score_threshold=0.1), n_samples=32)
    assert "box 0 (label 1) at [0.0, 0.0, 4.0, 4.0]" in boxes._repr_html_()
