"""VisualQuality-R1 (a Qwen2.5-VL fine-tune through transformers) as a scorer (`scorer`), and the
vision tower's attention with all windows of a batch in one SDPA call (`attention`)."""
