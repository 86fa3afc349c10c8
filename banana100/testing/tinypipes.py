"""Tiny random diffusers pipelines built offline (no Hub download), for the open-editor tests
and bench/generation/bench_open_editor.py.

Each builder returns a pipeline whose components have the real classes of the released model
(Flux2Pipeline, QwenImageEditPlusPipeline) but a few random weights, as diffusers' own fast
tests build them; the Hub tokenizers are replaced by a byte-level BPE tokenizer made here, with
each model's special tokens and a short chat template. Importing diffusers takes ~10 s: build
them once per test session (see the fixtures in tests/chains/test_open_editor.py).
"""

from __future__ import annotations

# Mistral / Qwen style: the text is the concatenation of the messages' text parts.
_CHAT_TEMPLATE = (
    "{% for m in messages %}{{ '<s>' if loop.first else '' }}"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}{% if c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}"
    "{% endif %}{% endfor %}"
)


def byte_tokenizer(special: list[str], pad: str, cls=None):
    """A byte-level BPE tokenizer (256 byte tokens, no merges) with `special` tokens after them."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(special)
    cls = cls or PreTrainedTokenizerFast
    out = cls(tokenizer_object=tok, pad_token=pad, padding_side="right")
    out.chat_template = _CHAT_TEMPLATE
    return out


def tiny_flux2():
    """Flux2Pipeline (FLUX.2 [dev]'s classes: Mistral3 text encoder, Flux2 transformer and VAE)."""
    import torch
    from diffusers import AutoencoderKLFlux2, FlowMatchEulerDiscreteScheduler, Flux2Pipeline, Flux2Transformer2DModel
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration

    tokenizer = byte_tokenizer(["<s>", "</s>", "<pad>", "[IMG]"], pad="<pad>")
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in ("<s>", "</s>", "<pad>", "[IMG]")}
    torch.manual_seed(0)
    transformer = Flux2Transformer2DModel(
        patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=16, timestep_guidance_channels=256, axes_dims_rope=[4, 4, 4, 4],
    )
    config = Mistral3Config(
        text_config={
            "model_type": "mistral", "vocab_size": len(tokenizer), "hidden_size": 16, "intermediate_size": 37,
            "max_position_embeddings": 512, "num_attention_heads": 4, "num_hidden_layers": 1,
            "num_key_value_heads": 2, "rms_norm_eps": 1e-05, "rope_theta": 1e9, "sliding_window": None,
            "bos_token_id": ids["<s>"], "eos_token_id": ids["</s>"], "pad_token_id": ids["<pad>"],
        },
        vision_config={
            "model_type": "pixtral", "hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 4,
            "intermediate_size": 37, "image_size": 30, "patch_size": 6, "num_channels": 3,
        },
        bos_token_id=ids["<s>"], eos_token_id=ids["</s>"], pad_token_id=ids["<pad>"],
        image_seq_length=4, vision_feature_layer=-1, image_token_index=ids["[IMG]"],
    )
    torch.manual_seed(0)
    text_encoder = Mistral3ForConditionalGeneration(config)
    torch.manual_seed(0)
    vae = AutoencoderKLFlux2(
        sample_size=32, in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",),
        up_block_types=("UpDecoderBlock2D",), block_out_channels=(4,), layers_per_block=1, latent_channels=1,
        norm_num_groups=1, use_quant_conv=False, use_post_quant_conv=False,
    )
    pipe = Flux2Pipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=text_encoder,
                         tokenizer=tokenizer, transformer=transformer)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def tiny_qwen_edit_plus():
    """QwenImageEditPlusPipeline (Qwen-Image-Edit-2511's classes: Qwen2.5-VL encoder, QwenImage DiT and VAE)."""
    import torch
    from diffusers import (
        AutoencoderKLQwenImage,
        FlowMatchEulerDiscreteScheduler,
        QwenImageEditPlusPipeline,
        QwenImageTransformer2DModel,
    )
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2TokenizerFast,
        Qwen2VLImageProcessor,
        Qwen2VLProcessor,
        Qwen2VLVideoProcessor,
    )

    special = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|vision_start|>", "<|vision_end|>",
               "<|image_pad|>", "<|video_pad|>"]
    tokenizer = byte_tokenizer(special, pad="<|endoftext|>", cls=Qwen2TokenizerFast)
    processor = Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(), tokenizer=tokenizer,
                                 video_processor=Qwen2VLVideoProcessor(), chat_template=_CHAT_TEMPLATE)
    torch.manual_seed(0)
    transformer = QwenImageTransformer2DModel(
        patch_size=2, in_channels=16, out_channels=4, num_layers=2, attention_head_dim=16, num_attention_heads=3,
        joint_attention_dim=16, guidance_embeds=False, axes_dims_rope=(8, 4, 4),
    )
    torch.manual_seed(0)
    z_dim = 4
    vae = AutoencoderKLQwenImage(base_dim=z_dim * 6, z_dim=z_dim, dim_mult=[1, 2, 4], num_res_blocks=1,
                                 temperal_downsample=[False, True], latents_mean=[0.0] * z_dim,
                                 latents_std=[1.0] * z_dim)
    torch.manual_seed(0)
    config = Qwen2_5_VLConfig(
        text_config={
            "hidden_size": 16, "intermediate_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
            "num_key_value_heads": 2, "vocab_size": len(tokenizer),
            "rope_scaling": {"mrope_section": [1, 1, 2], "rope_type": "default", "type": "default"},
            "rope_theta": 1000000.0, "bos_token_id": tokenizer.convert_tokens_to_ids("<|im_start|>"),
            "eos_token_id": tokenizer.convert_tokens_to_ids("<|im_end|>"),
        },
        vision_config={"depth": 2, "hidden_size": 16, "intermediate_size": 16, "num_heads": 2, "out_hidden_size": 16},
        hidden_size=16, vocab_size=len(tokenizer),
        vision_start_token_id=tokenizer.convert_tokens_to_ids("<|vision_start|>"),
        vision_end_token_id=tokenizer.convert_tokens_to_ids("<|vision_end|>"),
        image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        vision_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
    )
    text_encoder = Qwen2_5_VLForConditionalGeneration(config)
    pipe = QwenImageEditPlusPipeline(scheduler=FlowMatchEulerDiscreteScheduler(), vae=vae, text_encoder=text_encoder,
                                     tokenizer=tokenizer, processor=processor, transformer=transformer)
    pipe.set_progress_bar_config(disable=True)
    return pipe
