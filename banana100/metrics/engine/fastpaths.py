"""Faster forwards for pyiqa archs whose own forward does work the score never uses; same scores.

The engine wraps a pyiqa model with `speed_up` when it builds it (`MetricScorer`, `from_model`).
A wrapper computes pyiqa's forward with the model's own weights (shared, not copied), bit for
bit on the same device, minus the waste (tests/metrics/engine/test_fastpaths.py checks it on random weights,
odd sizes included; bench/engine/bench_cnniqa_maniqa.py measures it):

- CNNIQA (Kang et al., CVPR 2014): pyiqa pools the 50 feature maps with `F.max_pool2d(h, (H, W))`,
  a kernel the size of the whole image, for the max and again on `-h` for the min. A global
  `amax` / `amin` gives the same values; on CUDA the pool is one thread scanning a whole plane.
- MANIQA (Yang et al., CVPRW 2022): the score reads the outputs of ViT blocks 6-9 (forward hooks)
  and throws the ViT's own output away; blocks 10 and 11, the norm and the head (a sixth of the
  ViT's work) are skipped. Every crop of every image of a batch goes through one ViT forward,
  as pyiqa's arch already does for a batch (the engine batches MANIQA: table `batchable`).

Any other model comes back unchanged; `original` gives back the pyiqa model under a wrapper.
Like pyiqa's `InferenceModel.forward`, the wrappers run with cuDNN deterministic and without
benchmark (the same convolution algorithms, so the same bits); they skip its input-range
assertion (the engine's inputs are uint8 / 255), which costs a device sync per call.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import nn

log = logging.getLogger(__name__)


class _Fast(nn.Module):
    """pyiqa's InferenceModel (kept as `pyiqa_model`, weights shared) with a faster `net` forward."""

    def __init__(self, pyiqa_model: nn.Module):
        super().__init__()
        self.pyiqa_model = pyiqa_model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        net = self.pyiqa_model.net
        x = x.to(next(net.parameters()).device)
        with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True), torch.no_grad():
            return self.net_forward(net, x)

    @staticmethod
    def net_forward(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class FastCNNIQA(_Fast):
    @staticmethod
    def net_forward(net, x):
        h = net.conv1(x)
        # pyiqa: F.max_pool2d(h, (H, W)) and -F.max_pool2d(-h, (H, W)): the same values
        h = torch.cat((h.amax(dim=(-2, -1)), h.amin(dim=(-2, -1))), 1)
        h = F.relu(net.fc1(h))
        h = net.dropout(h)
        h = F.relu(net.fc2(h))
        return net.fc3(h)


def _vit_blocks_6_to_9(vit: nn.Module, x: torch.Tensor) -> None:
    """timm's VisionTransformer.forward_features up to block 9; pyiqa's hooks record each block."""
    x = vit.norm_pre(vit.patch_drop(vit._pos_embed(vit.patch_embed(x))))
    for block in vit.blocks[:10]:
        x = block(x)


class FastMANIQA(_Fast):
    @staticmethod
    def net_forward(net, x):
        # pyiqa.archs.maniqa_arch.MANIQA.forward (eval), the ViT stopped after the last block it reads
        from einops import rearrange
        from pyiqa.archs.arch_util import uniform_crop

        x = (x - net.default_mean.to(x)) / net.default_std.to(x)
        bsz = x.shape[0]
        x = uniform_crop(x, crop_size=224, crop_num=net.test_sample)
        net.save_output.outputs.clear()
        _vit_blocks_6_to_9(net.vit, x)
        x = net.extract_feature(net.save_output)
        net.save_output.outputs.clear()
        n = net.input_size
        x = rearrange(x, "b (h w) c -> b c (h w)", h=n, w=n)
        for tab in net.tablock1:
            x = tab(x)
        x = rearrange(x, "b c (h w) -> b c h w", h=n, w=n)
        x = net.swintransformer1(net.conv1(x))
        x = rearrange(x, "b c h w -> b c (h w)", h=n, w=n)
        for tab in net.tablock2:
            x = tab(x)
        x = rearrange(x, "b c (h w) -> b c h w", h=n, w=n)
        x = net.swintransformer2(net.conv2(x))
        x = rearrange(x, "b c h w -> b (h w) c", h=n, w=n)
        per_patch_score = net.fc_score(x).reshape(bsz, -1)
        per_patch_weight = net.fc_weight(x).reshape(bsz, -1)
        score = (per_patch_weight * per_patch_score).sum(dim=-1) / (per_patch_weight.sum(dim=-1) + 1e-8)
        return score.unsqueeze(1)


def _maniqa_ok(net) -> bool:
    vit = net.vit
    # timm's ViT internals this path calls, and pyiqa's hooks on all 12 blocks (10 and 11 unread)
    return (all(hasattr(vit, a) for a in ("patch_embed", "_pos_embed", "patch_drop", "norm_pre", "blocks"))
            and len(vit.blocks) == 12 and hasattr(net, "save_output") and not net.training)


# pyiqa arch class name -> (wrapper, the check that this pyiqa / timm has what it calls)
_FAST = {"CNNIQA": (FastCNNIQA, lambda net: True), "MANIQA": (FastMANIQA, _maniqa_ok)}


def speed_up(model: nn.Module) -> nn.Module:
    """`model` with a faster forward giving the same scores when it is a pyiqa model of an arch
    listed here (CNNIQA, MANIQA), else `model` itself."""
    net = getattr(model, "net", None)
    if net is None or getattr(model, "as_loss", False) or getattr(model, "metric_mode", "NR") != "NR":
        return model
    fast, usable = _FAST.get(type(net).__name__, (None, None))
    if fast is None:
        return model
    if not usable(net):
        log.info("%s: pyiqa's own forward (this pyiqa / timm lacks what the fast path calls)", type(net).__name__)
        return model
    return fast(model)


def original(model: nn.Module) -> nn.Module:
    """The pyiqa model under a `speed_up` wrapper (the model itself when not wrapped)."""
    return model.pyiqa_model if isinstance(model, _Fast) else model
