"""Qwen2.5-VL's vision attention with all windows of a batch in one SDPA call (issue 31).

Without flash-attn, transformers' Qwen2.5-VL vision attention splits the packed sequence at
`cu_seqlens` and calls SDPA once per window: a 2K image has about 361 windows of at most 64
patches, in 28 of its 32 layers, so about 10,000 small kernel calls per image. Here the segments
(windows, or whole images in the full-attention layers) become the batch dimension of one SDPA
call: each is padded to the longest one and a key mask hides the padding (the layout of
tenstorrent/tt-metal PR #37866; transformers PR #37363 measured such padding no faster than the
loop on small inputs, where the loop is cheap anyway). When all segments have the same length
(the full-attention layers of a batch of equal-size images) no copy and no mask are needed, so
SDPA may pick its flash kernel; long segments of unequal lengths (images of different sizes in a
full-attention layer) get a call each, as in transformers: a few calls, no padding.

It is registered with transformers' attention interface under ATTENTION, and set on the vision
tower's config only: the language model keeps its own attention. transformers hands the
segment boundaries (`cu_seq_lens_q`) only to implementations whose name contains "flash"
(`is_flash_attention_requested`); hence the name. A vision tower already on a real flash
attention is left alone (flash-attn's varlen kernel does all windows in one call already).

    from banana100.metrics.vlm.attention import set_vision_attention
    set_vision_attention(model)            # ATTENTION; set_vision_attention(model, "sdpa") undoes it
"""

from __future__ import annotations

import itertools
import logging
import weakref

import torch

log = logging.getLogger(__name__)

# The name under which transformers finds `batched_window_attention` ("flash" in it: see above).
ATTENTION = "banana100_batched_windows_flash"
# CUDA launches at most 65,535 blocks along a grid's y and z axes, where SDPA kernels put the batch;
# longer batches of segments are cut into calls of this many.
MAX_SEGMENTS_PER_CALL = 32_768
# Segments at least this long (whole images in the full-attention layers) get a call each when their
# lengths differ: padding costs work that grows with the square of the length, and a mask over
# them would keep SDPA off its flash kernel, while a few long calls cost little launch overhead.
LONG_SEGMENT = 1024


class _Plan:
    """Where each packed token goes in the padded [segments, longest, ...] layout, and the key mask.

    Built once per `cu_seqlens` tensor (a vision forward passes the same one to every layer of a
    kind) without a host sync: sizes come from the tensor's shape and the caller's `max_length`.
    """

    def __init__(self, cu_seqlens: torch.Tensor, total: int, longest: int):
        n = cu_seqlens.numel() - 1
        device = cu_seqlens.device
        starts = cu_seqlens[:-1].long()
        lengths = cu_seqlens[1:].long() - starts
        segment = torch.repeat_interleave(torch.arange(n, device=device), lengths, output_size=total)
        offset = torch.arange(total, device=device) - starts[segment]
        self.dest = segment * longest + offset  # packed token -> row of the padded layout
        self.keys = (torch.arange(longest, device=device) < lengths[:, None]).view(n, 1, 1, longest)
        self.segments, self.longest = n, longest
        self.source = weakref.ref(cu_seqlens)


_plans: dict[tuple, _Plan] = {}


def _plan(cu_seqlens: torch.Tensor, total: int, longest: int) -> _Plan:
    key = (cu_seqlens.device, cu_seqlens.numel(), total, longest)
    plan = _plans.get(key)
    if plan is None or plan.source() is not cu_seqlens:  # a live tensor is never refilled in place
        plan = _plans[key] = _Plan(cu_seqlens, total, longest)
        if len(_plans) > 8:  # windows and full layers of the current forward; drop older ones
            del _plans[next(iter(_plans))]
    return plan


def _sdpa(q, k, v, mask, scaling):
    """SDPA over [segments, heads, length, dim], cut into calls of MAX_SEGMENTS_PER_CALL segments."""
    f = torch.nn.functional.scaled_dot_product_attention
    n = q.shape[0]
    if n <= MAX_SEGMENTS_PER_CALL:
        return f(q, k, v, attn_mask=mask, scale=scaling)
    parts = []
    for a in range(0, n, MAX_SEGMENTS_PER_CALL):
        b = a + MAX_SEGMENTS_PER_CALL
        parts.append(f(q[a:b], k[a:b], v[a:b], attn_mask=None if mask is None else mask[a:b], scale=scaling))
    return torch.cat(parts)


def batched_window_attention(module, query, key, value, attention_mask=None, scaling=None, dropout=0.0,
                             cu_seq_lens_q=None, max_length_q=None, is_causal=False, **kwargs):
    """Attention within each segment of a packed sequence, all segments in one SDPA call.

    query/key/value: [1, heads, tokens, dim], segments at `cu_seq_lens_q` (int32, tokens + 1 bounds
    from 0). Returns ([1, tokens, heads, dim], None), as transformers' attention functions do.
    """
    if cu_seq_lens_q is None or is_causal or attention_mask is not None or query.shape[0] != 1:
        raise ValueError(f"{ATTENTION} is for Qwen2.5-VL's vision tower only (packed, non-causal, unmasked)")
    if dropout and module.training:
        raise ValueError(f"{ATTENTION} is for inference (no attention dropout)")
    _, heads, total, dim = query.shape
    n = cu_seq_lens_q.numel() - 1
    longest = int(max_length_q) if max_length_q is not None else int((cu_seq_lens_q[1:] - cu_seq_lens_q[:-1]).max())
    if n * longest == total:  # equal segments: a view, no padding, no mask
        q, k, v = (t[0].view(heads, n, longest, dim).transpose(0, 1) for t in (query, key, value))
        out = _sdpa(q, k, v, None, scaling)  # [n, heads, longest, dim]
        return out.transpose(1, 2).reshape(1, total, heads, dim), None
    if longest >= LONG_SEGMENT:
        bounds = cu_seq_lens_q.tolist()  # one host sync, as transformers' loop makes per layer
        out = torch.cat([_sdpa(query[:, :, a:b], key[:, :, a:b], value[:, :, a:b], None, scaling)
                         for a, b in itertools.pairwise(bounds)], dim=2)
        return out.transpose(1, 2), None
    plan = _plan(cu_seq_lens_q, total, longest)
    padded = []
    for t in (query, key, value):
        p = t.new_zeros(n * longest, heads, dim)
        p[plan.dest] = t[0].transpose(0, 1)
        padded.append(p.view(n, longest, heads, dim).transpose(1, 2))
    out = _sdpa(*padded, plan.keys, scaling)  # padded query rows see real keys only: finite, then dropped
    out = out.transpose(1, 2).reshape(n * longest, heads, dim)[plan.dest]
    return out.unsqueeze(0), None


def register() -> str:
    """Registers `batched_window_attention` with transformers as ATTENTION (idempotent)."""
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, batched_window_attention)
    return ATTENTION


def vision_configs(model) -> list:
    """The distinct config objects the vision tower's modules read `_attn_implementation` from."""
    visual = getattr(getattr(model, "model", model), "visual", None) or getattr(model, "visual", None)
    if visual is None:
        raise ValueError(f"{type(model).__name__} has no vision tower (`.visual`)")
    configs = {id(visual.config): visual.config}
    for m in visual.modules():
        c = getattr(m, "config", None)
        if c is not None:
            configs[id(c)] = c
    top = getattr(model, "config", None)
    if getattr(top, "vision_config", None) is not None:
        configs[id(top.vision_config)] = top.vision_config
    return list(configs.values())


def vision_attention(model) -> str:
    """The attention implementation the vision tower uses now."""
    return vision_configs(model)[0]._attn_implementation or "sdpa"


def set_vision_attention(model, implementation: str = ATTENTION) -> str:
    """Sets the vision tower's attention (the language model's stays as it is); returns what is now used.

    `implementation`: ATTENTION (the batched windows), or "sdpa" / "eager" (transformers' loop over
    windows). Asking for ATTENTION when the tower already runs a flash-attn kernel keeps that kernel.
    """
    current = vision_attention(model)
    if implementation == ATTENTION:
        if "flash" in current and current != ATTENTION:
            log.info("vision tower already on %s (one varlen call per layer): kept", current)
            return current
        register()
    # set on the configs directly: transformers' own setter would look for a flash-attn package
    for config in vision_configs(model):
        config._attn_implementation = implementation
    return implementation
