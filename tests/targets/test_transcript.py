"""``Transcript``: CTC speech recognisers explained by their transcript's likelihood, whole and per word."""

from __future__ import annotations

import itertools

import pytest
import torch

import torchlime
from torchlime.targets import Transcript
from torchlime.targets.transcript import greedy, viterbi

SEGMENTS = torch.arange(64).view(1, 64) // 8  # 8 time segments of 8 samples
FRAMES = 8


class Recogniser(torch.nn.Module):
    """A CTC model over 8 frames of 8 samples and 4 labels (0 = blank, 3 = word delimiter): frame f says
    label 1 when its samples are loud and label 2 when they are quiet but not silent; silence is blank."""

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        level = w.view(w.shape[0], FRAMES, -1).abs().mean(-1)  # (c, 8)
        loud, soft = (level - 0.5) * 8, 4 - (level - 0.25).abs() * 16
        silent = 2 - level * 16
        return torch.stack((silent, loud, soft, torch.full_like(level, -4.0)), -1)


def waves() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    w = torch.zeros(2, 64)
    w[0, 16:24] = 0.9  # a loud window: label 1 from frame 2
    w[0, 40:48] = 0.25 + 0.02 * torch.rand(8, generator=g)  # a soft window: label 2 from frame 5
    w[1, 8:16] = 0.9
    return w


def test_viterbi_is_the_best_path_of_the_transcript():
    torch.manual_seed(0)

    def collapse(path):
        out, prev = [], None
        for p in path:
            if p != prev and p != 0:
                out.append(p)
            prev = p
        return out

    for labels in ([1, 2], [2, 2], [1]):
        lp = torch.randn(1, 5, 3).log_softmax(-1)
        best = max(
            (sum(lp[0, t, p[t]].item() for t in range(5)), p)
            for p in itertools.product(range(3), repeat=5)
            if collapse(p) == labels
        )
        pos = viterbi(lp, torch.tensor([labels]), torch.tensor([len(labels)]), 0)[0].tolist()
        path = [labels[p] if p >= 0 else 0 for p in pos]
        assert collapse(path) == labels
        assert sum(lp[0, t, path[t]].item() for t in range(5)) == pytest.approx(best[0], abs=1e-5)


def test_greedy_decoding_merges_repeats_and_drops_blanks():
    logits = torch.tensor([[[0, 5.0, 0], [0, 5, 0], [5, 0, 0], [0, 0, 5], [0, 5, 0]]])
    labels, lengths = greedy(logits, 0)
    assert labels.tolist() == [[1, 2, 1]] and lengths.tolist() == [3]


def reference_scores(model, x, samples, labels, word_frames):
    """Per sample, one at a time: the CTC log-likelihood and each word's log-probabilities on its frames."""
    out = torch.zeros(samples.shape[0], samples.shape[1], 1 + len(word_frames[0]))
    for b in range(samples.shape[0]):
        for s in range(samples.shape[1]):
            keep = samples[b, s][SEGMENTS[0]].float()
            lp = model((x[b] * keep).unsqueeze(0)).log_softmax(-1)[0]  # (Tm, V)
            target = torch.tensor(labels[b])
            out[b, s, 0] = -torch.nn.functional.ctc_loss(
                lp.unsqueeze(1),
                target.unsqueeze(0),
                torch.tensor([FRAMES]),
                torch.tensor([len(labels[b])]),
                reduction="sum",
            )
            for w, frames in enumerate(word_frames[b]):
                out[b, s, 1 + w] = sum(lp[f, lab] for f, lab in frames)
    return out


def test_scores_equal_a_slow_reference():
    model, x = Recogniser(), waves()
    exp = torchlime.explain(model, x, SEGMENTS, target=Transcript(), n_samples=40, return_samples=True)
    labels = exp.run.targets.token_ids
    assert labels == [[1, 2], [1]]
    lp = model(x).log_softmax(-1)
    padded = torch.tensor([[1, 2], [1, 0]])
    pos = viterbi(lp, padded, torch.tensor([2, 1]), 0)
    word_frames = [
        [[(f, labels[b][p]) for f, p in enumerate(pos[b].tolist()) if p == w] for w in range(2)] for b in range(2)
    ]
    ref = reference_scores(model, x, exp.samples, labels, word_frames)
    valid = exp.target_valid
    assert valid.tolist() == [[True, True, True], [True, True, False]]
    assert torch.allclose(exp.outputs[:, :, :2], ref[:, :, :2], atol=1e-4)
    assert torch.allclose(exp.outputs[0, :, 2], ref[0, :, 2], atol=1e-4)
    assert (exp.coef[1, 2] == 0).all() and exp.target[1, 2] == -1


def test_each_word_points_at_its_planted_window():
    exp = torchlime.explain(Recogniser(), waves(), SEGMENTS, target=Transcript(), n_samples=300, generator=0)
    top = exp.top_features(1, by="abs")[0]
    assert top[0, 1, 0] == 2 and top[0, 2, 0] == 5  # word "1" from samples 16..23, word "2" from 40..47
    assert top[1, 1, 0] == 1


@pytest.mark.filterwarnings("ignore::torchlime.UnreliableExplanationWarning")  # input 1 says nothing of word 2
def test_word_delimiter_groups_labels_into_words():
    exp = torchlime.explain(
        Recogniser(), waves(), SEGMENTS, target=Transcript(token_ids=[1, 3, 2], word_delimiter=3), n_samples=40
    )
    assert exp.coef.shape[1] == 3  # the whole transcript and its two words


def test_a_wav2vec2_ctc_model_as_it_is():
    transformers = pytest.importorskip("transformers")
    config = transformers.Wav2Vec2Config(
        vocab_size=8,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        conv_dim=(16, 16),
        conv_stride=(5, 4),
        conv_kernel=(10, 8),
        num_conv_pos_embeddings=8,
        num_conv_pos_embedding_groups=2,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = transformers.Wav2Vec2ForCTC(config).eval()
    w = torch.randn(2, 1600) * 0.1
    run = lambda: torchlime.audio.explain_waveform(  # noqa: E731
        model, w, sample_rate=16000, time_segments=8, target=Transcript(token_ids=[3, 5, 3]), n_samples=24, generator=1
    )
    exp, again = run(), run()
    assert exp.coef.shape == (2, 4, 8) and torch.isfinite(exp.coef).all()
    assert torch.equal(exp.coef, again.coef)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="`token_ids` must not hold the blank label 0"):
        Transcript(token_ids=[0, 1])
    with pytest.raises(ValueError, match="`token_ids` must hold at least one label"):
        Transcript(token_ids=[[1], []])
    with pytest.raises(ValueError, match="`token_ids` holds 3 transcripts, not one per input"):
        torchlime.explain(Recogniser(), waves(), SEGMENTS, target=Transcript(token_ids=[[1], [2], [1]]), n_samples=8)
    with pytest.raises(ValueError, match=r"`token_ids` must be labels in \[0, 4\)"):
        torchlime.explain(Recogniser(), waves(), SEGMENTS, target=Transcript(token_ids=[7]), n_samples=8)
    for bad in (dict(blank="0"), dict(blank=-1), dict(word_delimiter="|"), dict(word_delimiter=2.0)):
        name = next(iter(bad))
        with pytest.raises((TypeError, ValueError), match=f"`{name}` must be (an int )?>= 0"):
            Transcript(**bad)
    numpy = pytest.importorskip("numpy")
    rows = [Transcript(token_ids=t).token_ids for t in (numpy.array([[1, 2], [2, 1]]), torch.tensor([[1, 2], [2, 1]]))]
    assert all([r.tolist() for r in got] == [[1, 2], [2, 1]] for got in rows)  # one transcript per input
    assert [r.tolist() for r in Transcript(token_ids=torch.tensor([1, 2])).token_ids] == [[1, 2]]
    flat = lambda w: w[:, :4]  # noqa: E731
    with pytest.raises(ValueError, match=r"Transcript needs \(rows, frames, labels\) logits"):
        torchlime.explain(flat, waves(), SEGMENTS, target=Transcript(), n_samples=8)


def test_plot_transcript_draws_the_transcript_and_each_word():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from torchlime.audio.viz_transcript import plot_transcript

    def asr(s):  # (c, Fr, Tm) spectrograms -> (c, Tm, 3) frame logits
        loud = s.mean(1)
        return torch.stack((1 - loud, loud, torch.zeros_like(loud)), -1) * 5

    specs = torch.rand(2, 16, 20, generator=torch.Generator().manual_seed(0))
    exp = torchlime.audio.explain_spectrogram(asr, specs, target=Transcript(token_ids=[1]), n_samples=64)
    fig = plot_transcript(exp, specs, index=1, words=["one"])
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles[0].startswith("the whole transcript") and titles[1].startswith("one")
    plain = torchlime.audio.explain_spectrogram(lambda s: asr(s)[:, 0], specs, target=0, n_samples=16)
    with pytest.raises(ValueError, match="target=Transcript"):
        plot_transcript(plain, specs)


def test_an_ocr_model_through_the_image_door_explains_each_character():
    def ocr(images: torch.Tensor) -> torch.Tensor:  # a CTC line reader: a frame per quarter; inks of "a" and "b"
        ink = images.mean(2).view(images.shape[0], 2, 4, -1).mean(-1)  # (c, 2, 4 frames)
        return torch.cat((torch.ones_like(ink[:, :1]), 5 * ink), 1).transpose(1, 2)  # (c, frames, 3 labels)

    line = torch.zeros(1, 2, 8, 32)  # an image of the line "abab"
    for i, ink in enumerate([0, 1, 0, 1]):
        line[0, ink, :, 8 * i : 8 * i + 8] = 1.0
    letters = torch.arange(32).expand(8, 32) // 8
    exp = torchlime.image.explain_image(ocr, line, segments=letters, target=Transcript(), baseline=0.0, n_samples=64)
    assert exp.run.targets.token_ids == [[1, 2, 1, 2]]  # no word delimiter: each character a word
    assert exp.target.tolist() == [[0, 1, 2, 3, 4]] and exp.coef[0, 1:].argmax(1).tolist() == [0, 1, 2, 3]
