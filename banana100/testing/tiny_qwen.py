"""A tiny random Qwen2.5-VL (about 115k parameters) and its processor, built offline; and
Qwen2.5-VL-7B's architecture with random weights (bench/gpu/gpu_vlm_check.py).

The tokenizer is byte-level BPE with no merges (every byte one token) plus Qwen's special
tokens; the chat template renders what Qwen2.5-VL's does for one user turn with images.
Nothing is downloaded: the VisualQuality-R1 code paths (processor, left padding, generate,
decode, parsing) run on it exactly as on the real checkpoint.
"""

from __future__ import annotations

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
            "<|image_pad|>", "<|video_pad|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for c in message['content'] %}{% if c['type'] == 'image' %}"
    "{% if add_vision_id %}Picture {{ loop.index }}: {% endif %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_processor():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tok = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    return Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(), tokenizer=fast,
                               video_processor=Qwen2VLVideoProcessor(), chat_template=CHAT_TEMPLATE)


def tiny_model(processor, seed: int = 0):
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    ids = {t: processor.tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    config = Qwen2_5_VLConfig(
        text_config=dict(vocab_size=len(processor.tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=8192, rope_scaling={"type": "mrope", "mrope_section": [1, 1, 2]},
                         bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                         pad_token_id=ids["<|endoftext|>"]),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=4, out_hidden_size=32,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2, fullatt_block_indexes=[1],
                           window_size=112, in_channels=3),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    torch.manual_seed(seed)
    return Qwen2_5_VLForConditionalGeneration(config).eval()


# Qwen2.5-VL-7B-Instruct's config.json (text and vision towers)
TEXT_7B = dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=128000,
               rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]}, rope_theta=1000000.0)
VISION_7B = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584,
                 patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                 fullatt_block_indexes=[7, 15, 23, 31], in_channels=3)


def config_7b(processor):
    """Qwen2.5-VL-7B's configuration with `processor`'s special-token ids."""
    from transformers import Qwen2_5_VLConfig

    ids = {t: processor.tokenizer.convert_tokens_to_ids(t) for t in SPECIALS}
    return Qwen2_5_VLConfig(
        text_config=dict(TEXT_7B, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                         pad_token_id=ids["<|endoftext|>"]),
        vision_config=VISION_7B, image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])


def random_7b(processor, dtype, device):
    """Qwen2.5-VL-7B's architecture with random weights, made directly on `device` in `dtype`
    (on a GPU: seconds; no float32 copy, no CPU initialisation)."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2_5_VLForConditionalGeneration._from_config(config_7b(processor), dtype=dtype)
    return model.eval()
