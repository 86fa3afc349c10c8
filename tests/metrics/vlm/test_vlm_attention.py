"""The batched window attention of Qwen2.5-VL's vision tower (banana100.metrics.vlm.attention, issue 31).

On the tiny random Qwen2.5-VL in float32 on CPU: the same hidden states, logits and answers as
transformers' loop over windows (<= 1e-5), with a few SDPA calls instead of one per window.
"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from banana100.metrics.vlm import scorer as vlm  # noqa: E402
from banana100.metrics.vlm import attention as va  # noqa: E402
from banana100.testing.tiny_qwen import tiny_model, tiny_processor  # noqa: E402

TOL = 1e-5


@pytest.fixture(scope="module")
def tiny():
    processor = tiny_processor()
    return tiny_model(processor), processor


def _images(sizes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes]


# odd sizes: 150x230 is 10x16 merged patches, so its windows of 4x4 are ragged at two edges
ODD = [(150, 230), (90, 150), (230, 150)]


class _Counter:
    """Counts torch's SDPA calls (each one kernel call, or a few on CPU) while active."""

    def __init__(self):
        self.calls = 0
        self.masks = []
        self._real = torch.nn.functional.scaled_dot_product_attention

    def __call__(self, *args, **kwargs):
        self.calls += 1
        self.masks.append(kwargs.get("attn_mask"))
        return self._real(*args, **kwargs)

    def __enter__(self):
        self._patch = mock.patch("torch.nn.functional.scaled_dot_product_attention", self)
        self._patch.start()
        return self

    def __exit__(self, *exc):
        self._patch.stop()


def _vision(model, batch, attention):
    va.set_vision_attention(model, attention)
    with torch.no_grad(), _Counter() as n:
        out = model.model.visual(batch["pixel_values"], grid_thw=batch["image_grid_thw"])
    return out, n.calls


@pytest.mark.parametrize("sizes", [ODD, ODD[:1]], ids=["batch", "single"])
def test_vision_tower_equals_the_loop_over_windows(tiny, sizes):
    model, processor = tiny
    s = vlm.VLMScorer(model=model, processor=processor, device="cpu", max_pixels=2048 * 2048)
    batch = s.inputs(_images(sizes))
    loop, loop_calls = _vision(model, batch, "sdpa")
    ours, our_calls = _vision(model, batch, va.ATTENTION)
    # the windows really are ragged (padding and the mask are exercised)
    _, cu = vlm_window_bounds(model, batch)
    assert len(set((cu[1:] - cu[:-1]).tolist())) > 1
    assert (ours.last_hidden_state - loop.last_hidden_state).abs().max() <= TOL
    assert (ours.pooler_output - loop.pooler_output).abs().max() <= TOL
    assert loop.last_hidden_state.abs().max() > 0.1  # not a comparison of zeros
    # one call per layer (the tiny tower has one windowed layer, one full); the loop: one per window, per image
    assert our_calls == 2 and loop_calls == (len(cu) - 1) + len(sizes)


def vlm_window_bounds(model, batch):
    from transformers.vision_utils import get_vision_window_index

    v = model.model.visual
    return get_vision_window_index(batch["image_grid_thw"], v.spatial_merge_size, v.window_size, v.patch_size)


def test_at_most_20_attention_calls_for_one_1024px_image(tiny):
    """Issue 31's CPU check: one forward of the whole model (vision tower and language model's prefill)
    on a 1024 px image; transformers' loop made 103 calls (100 windows, 1 full, 2 language layers)."""
    model, processor = tiny
    s = vlm.VLMScorer(model=model, processor=processor, device="cpu")
    batch = s.inputs(_images([(1024, 1024)]))
    counts = {}
    for attention in ("sdpa", va.ATTENTION):
        va.set_vision_attention(model, attention)
        with torch.no_grad(), _Counter() as n:
            model(**batch)
        counts[attention] = n.calls
    assert counts["sdpa"] == 103
    assert counts[va.ATTENTION] <= 20


@pytest.mark.parametrize("batch_size", [3, 1])
def test_logits_and_answers_equal_the_loop(tiny, batch_size):
    model, processor = tiny
    images = _images(ODD)
    results = {}
    for attention in ("sdpa", va.ATTENTION):
        s = vlm.VLMScorer(model=model, processor=processor, device="cpu", batch_size=batch_size, max_new_tokens=12,
                          keep_text=True, vision_attention=attention)
        scored = s.measure(images, [f"i{k}" for k in range(len(images))])
        assert scored.errors  # the random model's answers do not parse
        with torch.no_grad():
            logits = model(**s.inputs(images)).logits[:, -1]
        results[attention] = (scored.texts, logits)
    (texts_a, logits_a), (texts_b, logits_b) = results.values()
    assert texts_a == texts_b and len(set(texts_a)) > 1
    assert (logits_a - logits_b).abs().max() <= TOL


def test_language_model_keeps_its_attention(tiny):
    model, processor = tiny
    vlm.VLMScorer(model=model, processor=processor, device="cpu")
    assert va.vision_attention(model) == va.ATTENTION
    assert model.config.text_config._attn_implementation == "sdpa"
    assert model.model.language_model.config._attn_implementation == "sdpa"
    # as the model came: untouched
    va.set_vision_attention(model, "sdpa")
    vlm.VLMScorer(model=model, processor=processor, device="cpu", vision_attention=None)
    assert va.vision_attention(model) == "sdpa"


def test_a_flash_attention_tower_is_kept(tiny):
    model, _ = tiny
    for c in va.vision_configs(model):
        c._attn_implementation = "flash_attention_2"
    try:
        assert va.set_vision_attention(model) == "flash_attention_2"
        assert va.vision_attention(model) == "flash_attention_2"
    finally:
        va.set_vision_attention(model, "sdpa")


def _packed(lengths, heads=3, dim=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    q, k, v = (torch.randn(1, heads, total, dim, generator=g) for _ in range(3))
    cu = torch.tensor([0, *np.cumsum(lengths)], dtype=torch.int32)
    return q, k, v, cu


def _loop(q, k, v, cu):
    outs = [torch.nn.functional.scaled_dot_product_attention(q[:, :, a:b], k[:, :, a:b], v[:, :, a:b])
            for a, b in zip(cu[:-1].tolist(), cu[1:].tolist(), strict=True)]
    return torch.cat(outs, dim=2).transpose(1, 2)


@pytest.mark.parametrize("lengths", [[5, 3, 7, 1], [4, 4, 4]], ids=["ragged", "equal"])
def test_function_equals_per_segment_sdpa(lengths):
    q, k, v, cu = _packed(lengths)
    with _Counter() as n:
        out, weights = va.batched_window_attention(None, q, k, v, scaling=q.shape[-1] ** -0.5,
                                                   cu_seq_lens_q=cu, max_length_q=max(lengths))
    assert weights is None and out.shape == (1, sum(lengths), 3, 8)
    assert (out - _loop(q, k, v, cu)).abs().max() <= TOL
    assert n.calls == 1
    assert (n.masks[0] is None) == (len(set(lengths)) == 1)  # equal segments: no mask (flash-eligible)


def test_a_new_bounds_tensor_of_the_same_shape_gets_its_own_plan():
    """The plan is cached per bounds tensor: one with other contents must not reuse it."""
    q, k, v, cu_a = _packed([5, 3, 7, 1])
    _, _, _, cu_b = _packed([1, 7, 3, 5])
    for cu in (cu_a, cu_b, cu_a.clone()):
        out, _ = va.batched_window_attention(None, q, k, v, scaling=None, cu_seq_lens_q=cu, max_length_q=7)
        assert (out - _loop(q, k, v, cu)).abs().max() <= TOL


def test_many_segments_are_cut_into_a_few_calls(monkeypatch):
    monkeypatch.setattr(va, "MAX_SEGMENTS_PER_CALL", 3)
    lengths = [2, 5, 1, 5, 3, 4, 5]
    q, k, v, cu = _packed(lengths)
    with _Counter() as n:
        out, _ = va.batched_window_attention(None, q, k, v, scaling=None, cu_seq_lens_q=cu, max_length_q=None)
    assert n.calls == 3
    assert (out - _loop(q, k, v, cu)).abs().max() <= TOL


def test_refuses_what_it_is_not_for():
    q, k, v, cu = _packed([2, 3])
    with pytest.raises(ValueError, match="vision tower"):
        va.batched_window_attention(None, q, k, v)  # no segment bounds: a language model's call
    with pytest.raises(ValueError, match="vision tower"):
        va.batched_window_attention(None, q, k, v, cu_seq_lens_q=cu, is_causal=True)


def test_long_unequal_segments_get_a_call_each(monkeypatch):
    """Images of different sizes in a full-attention layer: a call per image (no padding that grows with
    the square of the length); equal long segments stay one call; short ones are padded."""
    monkeypatch.setattr(va, "LONG_SEGMENT", 6)
    for lengths, calls in (([6, 13, 7], 3), ([13, 12, 13], 3), ([13, 13], 1), ([2, 5, 3, 5], 1)):
        q, k, v, cu = _packed(lengths)
        with _Counter() as n:
            out, _ = va.batched_window_attention(None, q, k, v, scaling=None, cu_seq_lens_q=cu,
                                                 max_length_q=max(lengths))
        assert n.calls == calls, lengths
        assert (out - _loop(q, k, v, cu)).abs().max() <= TOL
