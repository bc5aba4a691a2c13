"""Batched against one-at-a-time throughput of the transformers model backends, on a GPU or the CPU.

For each backend, the provider ttseval runs in the model stages:
  - ASR, Whisper-style: ttseval.providers.asr.transformers_asr (AutoModelForSpeechSeq2Seq.generate over a padded batch)
  - ASR, CTC (wav2vec2 / MMS style): the same provider, AutoModelForCTC over a padded batch
  - TTS, VITS (MMS-TTS): ttseval.providers.tts.transformers_tts, synthesize_batch against synthesize
it builds a model from its config with random weights (throughput does not depend on the weights; nothing is
downloaded) in a temporary folder, warms it up, then times the same clips or texts once one at a time and once in
batches of `--batch`, and prints items per second and the ratio batched / one-at-a-time.

Sizes: `--size tiny` (a few thousand parameters: the CPU run that CI keeps alive) or `--size full` (Whisper
large-v3's, wav2vec2-large's and MMS-TTS's dimensions: the GPU run; the README quotes it with the GPU's name and
the date). Whisper decodes a fixed `--new-tokens` per clip in both modes (random weights would stop at random).
Usage:
  python benchmarks/gpu_batch.py [--size full] [--device auto] [--items 64] [--batch 16] [--new-tokens 32]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RATE_HZ = 16000
DIMS: dict[str, dict[str, dict[str, Any]]] = {
    "tiny": {
        "whisper": {
            "d_model": 32,
            "encoder_layers": 1,
            "decoder_layers": 1,
            "encoder_attention_heads": 2,
            "decoder_attention_heads": 2,
            "encoder_ffn_dim": 64,
            "decoder_ffn_dim": 64,
            "num_mel_bins": 80,
            "max_source_positions": 1500,
            "max_target_positions": 448,
            "vocab_size": 512,
        },
        "ctc": {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "conv_dim": (16, 16, 16),
            "conv_kernel": (10, 3, 3),
            "conv_stride": (5, 4, 4),
            "num_conv_pos_embeddings": 16,
            "num_conv_pos_embedding_groups": 2,
        },
        "vits": {
            "hidden_size": 16,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "ffn_dim": 16,
            "flow_size": 8,
            "spectrogram_bins": 9,
            "upsample_initial_channel": 16,
            "upsample_rates": (4, 4),
            "upsample_kernel_sizes": (8, 8),
            "resblock_kernel_sizes": (3,),
            "resblock_dilation_sizes": ((1,),),
            "duration_predictor_filter_channels": 8,
            "duration_predictor_num_flows": 2,
            "prior_encoder_num_flows": 2,
            "prior_encoder_num_wavenet_layers": 1,
            "posterior_encoder_num_wavenet_layers": 1,
            "depth_separable_num_layers": 1,
        },
    },
    "full": {
        # openai/whisper-large-v3's config
        "whisper": {
            "d_model": 1280,
            "encoder_layers": 32,
            "decoder_layers": 32,
            "encoder_attention_heads": 20,
            "decoder_attention_heads": 20,
            "encoder_ffn_dim": 5120,
            "decoder_ffn_dim": 5120,
            "num_mel_bins": 128,
            "max_source_positions": 1500,
            "max_target_positions": 448,
            "vocab_size": 51866,
        },
        # facebook/wav2vec2-large-960h's (the conv front end is the default 7 x 512)
        "ctc": {
            "hidden_size": 1024,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "intermediate_size": 4096,
            "do_stable_layer_norm": True,
            "feat_extract_norm": "layer",
        },
        "vits": {},  # VitsConfig's defaults are facebook/mms-tts-eng's
    },
}
CHARS = "abcdefghijklmnopqrstuvwxyz '"


def build_whisper(path: Path, dims: dict[str, Any]) -> Path:
    """A Whisper model and processor: a byte-level BPE vocabulary with no merges, filled to the config's size
    (special tokens after it)."""
    import torch
    from tokenizers import pre_tokenizers
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    specials = ["<|endoftext|>", "<|startoftranscript|>", "<|transcribe|>", "<|notimestamps|>"]
    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())
    filler = [f"t{i}" for i in range(dims["vocab_size"] - len(symbols) - len(specials))]  # ids < vocab_size
    vocab = {s: i for i, s in enumerate(symbols + filler)}
    tokenizer = WhisperTokenizer(
        vocab=vocab,
        merges=[],
        unk_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    tokenizer.add_special_tokens({"additional_special_tokens": specials[1:]})
    ids = {s: tokenizer.convert_tokens_to_ids(s) for s in specials}
    path.mkdir(parents=True, exist_ok=True)
    config = WhisperConfig(
        **dims,
        decoder_start_token_id=ids["<|startoftranscript|>"],
        eos_token_id=ids["<|endoftext|>"],
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=ids["<|endoftext|>"],
    )
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=ids["<|startoftranscript|>"],
        eos_token_id=ids["<|endoftext|>"],
        pad_token_id=ids["<|endoftext|>"],
        no_timestamps_token_id=ids["<|notimestamps|>"],
    )
    model.save_pretrained(path)
    extractor = WhisperFeatureExtractor(feature_size=dims["num_mel_bins"], sampling_rate=RATE_HZ)
    WhisperProcessor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(path)
    return path


def build_ctc(path: Path, dims: dict[str, Any]) -> Path:
    import torch
    from transformers import (
        Wav2Vec2Config,
        Wav2Vec2CTCTokenizer,
        Wav2Vec2FeatureExtractor,
        Wav2Vec2ForCTC,
        Wav2Vec2Processor,
    )

    path.mkdir(parents=True, exist_ok=True)
    vocab = {"<pad>": 0, "<unk>": 1, "|": 2, **{c: i + 3 for i, c in enumerate(CHARS.replace(" ", ""))}}
    (path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = Wav2Vec2CTCTokenizer(
        str(path / "vocab.json"), unk_token="<unk>", pad_token="<pad>", word_delimiter_token="|"
    )
    extractor = Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=RATE_HZ, padding_value=0.0, do_normalize=True, return_attention_mask=True
    )
    torch.manual_seed(0)
    Wav2Vec2ForCTC(Wav2Vec2Config(vocab_size=len(vocab), pad_token_id=0, **dims)).save_pretrained(path)
    Wav2Vec2Processor(feature_extractor=extractor, tokenizer=tokenizer).save_pretrained(path)
    return path


def build_vits(path: Path, dims: dict[str, Any]) -> Path:
    import torch
    from transformers import VitsConfig, VitsModel, VitsTokenizer

    path.mkdir(parents=True, exist_ok=True)
    vocab = {"<pad>": 0, **{c: i + 1 for i, c in enumerate(CHARS)}, "<unk>": len(CHARS) + 1}
    (path / "source-vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = VitsTokenizer(
        str(path / "source-vocab.json"), language="eng", add_blank=True, normalize=True, phonemize=False
    )
    torch.manual_seed(0)
    VitsModel(VitsConfig(vocab_size=len(vocab), sampling_rate=RATE_HZ, **dims)).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def timed(run: Callable[[list[Any]], Any], items: list[Any], batch: int) -> float:
    """Seconds to run `items` in chunks of `batch`."""
    t0 = time.perf_counter()
    for i in range(0, len(items), batch):
        run(items[i : i + batch])
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", choices=sorted(DIMS), default="tiny")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    parser.add_argument("--items", type=int, default=64, help="clips (ASR) or texts (TTS) per mode")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=32, help="tokens Whisper decodes per clip")
    parser.add_argument("--only", default="whisper,ctc,vits")
    parser.add_argument(
        "--dtype",
        default="auto",
        help="the ASR models' dtype option: auto (float16 for Whisper on a GPU), float32, float16, bfloat16",
    )
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import numpy as np
    import torch
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()  # generate() notes that min_new_tokens overrides min_length, per call

    from ttseval.core.audio import Audio
    from ttseval.providers import torch_device
    from ttseval.providers.asr.transformers_asr import TransformersASR
    from ttseval.providers.tts.transformers_tts import TransformersTTS

    device = torch_device(args.device)
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else "none"
    print(
        f"{time.strftime('%Y-%m-%d')} size={args.size} device={device} GPU={gpu} torch={torch.__version__} "
        f"items={args.items} batch={args.batch} dtype={args.dtype}"
    )
    rng = np.random.default_rng(0)
    # 3 to 6 s clips of noise-modulated tones; texts of 40 to 90 characters
    clips = [
        Audio(
            (
                0.3 * np.sin(2 * np.pi * rng.uniform(120, 300) * np.arange(int(RATE_HZ * d)) / RATE_HZ)
                + 0.02 * rng.standard_normal(int(RATE_HZ * d))
            ).astype(np.float32),
            RATE_HZ,
        )
        for d in rng.uniform(3.0, 6.0, args.items)
    ]
    words = [
        "the",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "a",
        "lazy",
        "dog",
        "while",
        "seven",
        "tired",
        "owls",
        "watch",
        "quietly",
        "from",
        "above",
    ]
    texts = [" ".join(rng.choice(words, int(rng.integers(8, 16)))) for _ in range(args.items)]
    builders = {"whisper": build_whisper, "ctc": build_ctc, "vits": build_vits}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only.split(","):
            t0 = time.perf_counter()
            path = builders[name](Path(tmp) / name, DIMS[args.size][name])
            built = time.perf_counter() - t0
            if name == "vits":
                tts = TransformersTTS(model=str(path), device=args.device, batch_size=str(args.batch))

                def run(chunk: list[str], tts: Any = tts) -> Any:
                    if len(chunk) == 1:
                        return [tts.synthesize(chunk[0], "en")]
                    return tts.synthesize_batch(chunk, ["en"] * len(chunk), [None] * len(chunk))

                items: list[Any] = texts
            else:
                asr = TransformersASR(
                    model=str(path), device=args.device, max_new_tokens=str(args.new_tokens), dtype=args.dtype
                )
                if name == "whisper":  # a fixed number of tokens per clip in both modes
                    model = asr._load()[0]
                    model.generation_config.min_new_tokens = args.new_tokens

                def run(chunk: list[Audio], asr: Any = asr) -> Any:
                    return asr.transcribe(chunk, ["en"] * len(chunk))

                items = clips
            run(items[: min(2, len(items))])  # load and warm up
            one = timed(run, items, 1)
            batched = timed(run, items, args.batch)
            print(
                f"  {name:8s} built {built:.1f} s; one at a time {len(items) / one:8.2f}/s, batched "
                f"{len(items) / batched:8.2f}/s: batched / one-at-a-time {one / batched:.2f}x"
            )


if __name__ == "__main__":
    main()
