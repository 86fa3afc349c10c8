"""Build pyiqa's deep NR-IQA archs with random weights, offline, for plumbing tests.

Nothing is downloaded: pyiqa is asked for no checkpoint (`pretrained=False` and friends), timm
and torchvision build their backbones without weights, OpenAI CLIP is replaced by a small CLIP
of the same kind (RN or ViT) with random weights, and the few files an arch loads whatever its
arguments (DBCNN's S-CNN, QualiCLIP's CLIP weights, ARNIQA's encoder and regressor) are stood
in for by random state dicts of the right shapes. Any attempt to download raises.

The scores are meaningless; shapes, batching, devices and the engine's plumbing are what the
tests check. Q-Align (an 8B multimodal model loaded through transformers' remote code) and
NRQM / PI (a regression forest read from NRQM_model.mat at build time) cannot be built this way.
"""

from __future__ import annotations

from contextlib import ExitStack, contextmanager
from pathlib import Path
from unittest import mock

import torch
from torch import nn

# pyiqa kwargs for an untrained build; crop counts cut down to keep the tests quick on CPU.
UNTRAINED_KWARGS = {
    "cnniqa": {"pretrained": None},
    "dbcnn": {"pretrained": False},
    "hyperiqa": {"pretrained": False, "num_crop": 4},
    "wadiqam_nr": {"pretrained": False},
    "nima": {"pretrained": False},
    "paq2piq": {"pretrained": False},
    "musiq": {"pretrained": False},
    "maniqa": {"pretrained": False, "test_sample": 2},
    "tres": {"pretrained": False, "test_sample": 2},
    "topiq_nr": {"pretrained": False, "backbone_pretrain": False},
    "clipiqa": {},
    "liqe": {"pretrained": False},
    "qualiclip": {},
    "arniqa": {},
}
CANNOT_BUILD = {
    "nrqm": "NRQM reads its regression forest from NRQM_model.mat while it is built",
    "pi": "PI builds NRQM, which reads NRQM_model.mat while it is built",
    "qalign": "Q-Align loads an 8B mPLUG-Owl2 model through transformers' remote code; no random build is practical",
}
# The crop-count keywords cut down above; `build_untrained(real_crops=True)` drops them, so pyiqa's
# own test-time counts apply (hyperIQA 25, MANIQA 20, TReS 50): what timing and memory need.
CROP_KWARGS = ("num_crop", "test_sample")


def tiny_clip(kind: str, full: bool = False) -> nn.Module:
    """A random CLIP of the same family as RN50 / ViT-B/32 (same tokenizer and vocabulary).

    Small by default (quick tests); `full=True` gives the real RN50 / ViT-B/32 shapes, for
    timing and memory measurements.
    """
    from pyiqa.archs.clip_model import CLIP

    if full and kind.startswith("RN"):
        dims = dict(embed_dim=1024, vision_layers=(3, 4, 6, 3), vision_width=64, vision_patch_size=None,
                    transformer_width=512, transformer_heads=8, transformer_layers=12)
    elif full:
        dims = dict(embed_dim=512, vision_layers=12, vision_width=768, vision_patch_size=32,
                    transformer_width=512, transformer_heads=8, transformer_layers=12)
    elif kind.startswith("RN"):
        dims = dict(embed_dim=64, vision_layers=(1, 1, 1, 1), vision_width=64, vision_patch_size=None,
                    transformer_width=64, transformer_heads=1, transformer_layers=1)
    else:
        dims = dict(embed_dim=64, vision_layers=1, vision_width=64, vision_patch_size=32,
                    transformer_width=64, transformer_heads=1, transformer_layers=1)
    model = CLIP(image_resolution=224, context_length=77, vocab_size=49408, **dims)
    return model.eval().float()


def _refuse(*args, **kwargs):
    raise AssertionError(f"download attempted during an untrained build: {args[:1]}")


@contextmanager
def untrained_build(tmp_path: Path, full_clip: bool = False):
    """Patches under which `pyiqa.create_metric(name, **UNTRAINED_KWARGS[name])` builds offline."""
    import timm
    import torchvision
    from pyiqa.archs import arniqa_arch, clipiqa_arch, dbcnn_arch, liqe_arch, qualiclip_arch
    from pyiqa.utils import download_util

    torch.manual_seed(0)
    with ExitStack() as stack:
        patch = lambda *a, **k: stack.enter_context(mock.patch.object(*a, **k))  # noqa: E731
        # no network, whatever happens
        patch(download_util, "download_url_to_file", _refuse)
        patch(torch.hub, "download_url_to_file", _refuse)

        original_timm = timm.create_model
        patch(timm, "create_model", lambda name, pretrained=False, **kw: original_timm(name, pretrained=False, **kw))
        for arch in ("vgg16", "resnet18", "resnet34", "resnet50"):
            original = getattr(torchvision.models, arch)
            patch(torchvision.models, arch, lambda *a, _f=original, weights=None, **kw: _f(*a, weights=None, **kw))

        patch(clipiqa_arch, "load", lambda name, device="cpu", **kw: tiny_clip(name, full_clip))
        patch(liqe_arch, "load", lambda name, device="cpu", **kw: tiny_clip(name, full_clip))
        patch(liqe_arch, "DEFAULT_CACHE_DIR", str(tmp_path))  # LIQE caches its text features there
        patch(qualiclip_arch, "load", lambda name, device="cpu", **kw: tiny_clip(name, full_clip))

        # QualiCLIP always loads QualiCLIP.pth: CLIP weights + precomputed prompt features.
        qc = tiny_clip("RN50", full_clip)
        ckpt = {f"clip_model.{k}": v for k, v in qc.state_dict().items()}
        ckpt["prompts_features"] = nn.functional.normalize(torch.randn(14, qc.text_projection.shape[1]), dim=-1)
        qualiclip_ckpt = tmp_path / "QualiCLIP-random.pth"
        torch.save(ckpt, qualiclip_ckpt)
        patch(qualiclip_arch, "load_file_from_url", lambda url, *a, **k: str(qualiclip_ckpt))

        # DBCNN always loads its S-CNN checkpoint; random init stands in for it.
        original_load = dbcnn_arch.load_pretrained_network
        patch(dbcnn_arch, "load_pretrained_network",
              lambda net, path, *a, **k: None if str(path).startswith("http") else original_load(net, path, *a, **k))

        # ARNIQA: a ResNet-50 encoder state dict ("model." prefix) and a TorchScript regressor.
        enc = torchvision.models.resnet50(weights=None)
        enc_sd = {f"model.{k}": v for k, v in nn.Sequential(*list(enc.children())[:-1]).state_dict().items()}
        patch(arniqa_arch.torch.hub, "load_state_dict_from_url", lambda url, *a, **k: enc_sd)
        regressor = tmp_path / "arniqa-regressor.pt"
        torch.jit.save(torch.jit.script(nn.Linear(4096, 1)), str(regressor))
        patch(arniqa_arch, "load_file_from_url", lambda url, *a, **k: str(regressor))
        yield


def build_untrained(name: str, tmp_path: Path, device: str = "cpu", full_clip: bool = False,
                    real_crops: bool = False):
    """pyiqa's InferenceModel for `name`, with random weights (see the module docstring);
    `real_crops`: with pyiqa's own crop counts instead of the tests' cut-down ones."""
    import pyiqa

    kwargs = {k: v for k, v in UNTRAINED_KWARGS[name].items() if not (real_crops and k in CROP_KWARGS)}
    with untrained_build(tmp_path, full_clip):
        return pyiqa.create_metric(name, device=device, **kwargs)
