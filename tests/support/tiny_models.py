"""Tiny transformers models with random weights, built by the tests that need them (never downloaded)."""

from __future__ import annotations

import json
from pathlib import Path

CTC_VOCAB = {"<pad>": 0, "<unk>": 1, "|": 2, **{c: i + 3 for i, c in enumerate("abcdefghijklmnopqrstuvwxyz'")}}
LID_LABELS = ["pus", "urd", "eng"]  # MMS-LID's ISO 639-3 labels


def _wav2vec2_config(**extra):
    from transformers import Wav2Vec2Config

    return Wav2Vec2Config(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        conv_dim=(16, 16, 16),
        conv_kernel=(10, 3, 3),
        conv_stride=(5, 4, 4),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        **extra,
    )


def _extractor():
    from transformers import Wav2Vec2FeatureExtractor

    return Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True, return_attention_mask=True
    )


def build_tiny_ctc(directory: Path) -> Path:
    """A wav2vec2 CTC recogniser (letters a-z) saved with its processor."""
    import torch
    from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2ForCTC, Wav2Vec2Processor

    directory.mkdir(parents=True, exist_ok=True)
    vocab_path = directory / "vocab.json"
    vocab_path.write_text(json.dumps(CTC_VOCAB))
    tokenizer = Wav2Vec2CTCTokenizer(str(vocab_path), unk_token="<unk>", pad_token="<pad>", word_delimiter_token="|")
    torch.manual_seed(0)
    model = Wav2Vec2ForCTC(_wav2vec2_config(vocab_size=len(CTC_VOCAB), pad_token_id=0)).eval()
    with torch.no_grad():
        # random weights mostly predict one token; push <pad> down so the decode is a non-empty string
        model.lm_head.bias[0] = -5.0
    model.save_pretrained(directory)
    Wav2Vec2Processor(feature_extractor=_extractor(), tokenizer=tokenizer).save_pretrained(directory)
    return directory


def build_tiny_lid(directory: Path) -> Path:
    """An MMS-LID-shaped audio classifier (wav2vec2 + mean pooling + a head) over LID_LABELS."""
    import torch
    from transformers import Wav2Vec2ForSequenceClassification

    torch.manual_seed(0)
    config = _wav2vec2_config(
        num_labels=len(LID_LABELS),
        id2label=dict(enumerate(LID_LABELS)),
        label2id={label: i for i, label in enumerate(LID_LABELS)},
        classifier_proj_size=8,
    )
    Wav2Vec2ForSequenceClassification(config).eval().save_pretrained(directory)
    _extractor().save_pretrained(directory)
    return directory


WHISPER_LANGUAGES = ["en", "fr", "ps", "ur"]


def build_tiny_whisper(directory: Path) -> Path:
    """A multilingual Whisper-shaped seq2seq model (1 layer each side, d_model 16) with a byte-level tokenizer,
    Whisper's special tokens for four languages and the generation config that names them (lang_to_id)."""
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    directory.mkdir(parents=True, exist_ok=True)
    vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())}
    specials = [
        "<|endoftext|>",
        "<|startoftranscript|>",
        *[f"<|{code}|>" for code in WHISPER_LANGUAGES],
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nocaptions|>",
        "<|notimestamps|>",
    ]
    for token in specials:
        vocab[token] = len(vocab)
    (directory / "vocab.json").write_text(json.dumps(vocab))
    (directory / "merges.txt").write_text("#version: 0.2\n")
    end = "<|endoftext|>"
    tokenizer = WhisperTokenizer(
        str(directory / "vocab.json"),
        str(directory / "merges.txt"),
        unk_token=end,
        bos_token=end,
        eos_token=end,
        pad_token=end,
    )
    tokenizer.add_special_tokens({"additional_special_tokens": specials[1:]})
    config = WhisperConfig(
        vocab_size=len(vocab),
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        num_mel_bins=80,
        max_source_positions=1500,
        max_target_positions=448,
        decoder_start_token_id=vocab["<|startoftranscript|>"],
        pad_token_id=vocab[end],
        eos_token_id=vocab[end],
        bos_token_id=vocab[end],
        suppress_tokens=[],
        begin_suppress_tokens=[],
    )
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config).eval()
    generation = GenerationConfig.from_model_config(config)
    generation._from_model_config = False  # keep lang_to_id when loading, as real checkpoints do
    generation.lang_to_id = {f"<|{code}|>": vocab[f"<|{code}|>"] for code in WHISPER_LANGUAGES}
    generation.task_to_id = {"transcribe": vocab["<|transcribe|>"], "translate": vocab["<|translate|>"]}
    generation.is_multilingual = True
    generation.no_timestamps_token_id = vocab["<|notimestamps|>"]
    model.generation_config = generation
    model.save_pretrained(directory)
    WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tokenizer).save_pretrained(
        directory
    )
    return directory


def build_tiny_wavlm_xvector(directory: Path) -> Path:
    """A WavLM speaker-verification model (WavLMForXVector: TDNN layers, statistics pooling, a 16-d x-vector), the
    shape of microsoft/wavlm-base-plus-sv, saved with its feature extractor."""
    import torch
    from transformers import WavLMConfig, WavLMForXVector

    torch.manual_seed(0)
    config = WavLMConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        conv_dim=(16, 16, 16),
        conv_kernel=(10, 3, 3),
        conv_stride=(5, 4, 4),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=2,
        num_buckets=16,
        max_bucket_distance=64,
        tdnn_dim=(16, 16, 32),
        tdnn_kernel=(5, 3, 1),
        tdnn_dilation=(1, 2, 1),
        xvector_output_dim=16,
    )
    WavLMForXVector(config).eval().save_pretrained(directory)
    _extractor().save_pretrained(directory)
    return directory


def build_tiny_dia(directory: Path) -> Path:
    """A Dia dialogue TTS model (DiaForConditionalGeneration, Dia-1.6B's token layout: 9 DAC codebooks of 1024,
    delay pattern 0, 8..15) and its processor, with a tiny DAC codec at 44.1 kHz saved beside it (dac/)."""
    import torch
    from transformers import (
        DacConfig,
        DacModel,
        DiaConfig,
        DiaFeatureExtractor,
        DiaForConditionalGeneration,
        DiaProcessor,
        DiaTokenizer,
    )
    from transformers.models.dia.configuration_dia import DiaDecoderConfig, DiaEncoderConfig

    torch.manual_seed(0)
    codec = DacModel(
        DacConfig(
            encoder_hidden_size=4,
            downsampling_ratios=[2, 4, 8, 8],
            decoder_hidden_size=16,
            n_codebooks=9,
            codebook_size=1024,
            codebook_dim=4,
            hidden_size=16,
            sampling_rate=44100,
        )
    )
    with torch.no_grad():  # spread the codebooks, so different codes decode to audibly different frames
        for quantizer in codec.quantizer.quantizers:
            quantizer.codebook.weight.mul_(50.0)
    codec.eval().save_pretrained(directory / "dac")
    attention = {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "initializer_range": 0.5,
    }  # wide: a prompt moves the logits
    config = DiaConfig(
        encoder_config=DiaEncoderConfig(vocab_size=256, **attention),
        decoder_config=DiaDecoderConfig(
            num_channels=9,
            vocab_size=1028,
            cross_num_attention_heads=2,
            cross_head_dim=16,
            cross_num_key_value_heads=2,
            cross_hidden_size=32,
            **attention,
        ),
    )
    model = DiaForConditionalGeneration(config).eval()
    with torch.no_grad():  # random weights would often say EOS first: zero the special tokens' output rows (1024+)
        model.logits_dense.weight.view(9, 1028, -1)[:, 1024:] = 0.0
    model.save_pretrained(directory)
    DiaProcessor(
        DiaFeatureExtractor(sampling_rate=44100, hop_length=512),
        DiaTokenizer(),
        DacModel.from_pretrained(directory / "dac"),
    ).save_pretrained(directory)
    return directory


def build_random_utmos22(path: Path) -> Path:
    """UTMOS22's strong learner (utmos-pytorch's UTMOSModel: wav2vec 2.0 base, BLSTM, projection; 103 M weights)
    with random weights, saved as the package's converted state dict (the shape of utmos_state_dict.pt, 413 MB)."""
    import warnings

    import torch
    from utmos_pytorch.utmos_torch import UTMOSModel

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the package's weight_norm call
        model = UTMOSModel()
    with torch.no_grad():  # spread the head's output, so different clips get visibly different scores
        model.output_layers[1].net[3].weight.mul_(20.0)
    torch.save(model.state_dict(), path)
    return path


NISQA_ARGS = {  # the architecture and mel-spectrogram settings of NISQA v2.0's nisqa.tar / nisqa_tts.tar
    "model": "NISQA_DIM",
    "ms_sr": None,
    "ms_fmax": 20000,
    "ms_n_fft": 4096,
    "ms_hop_length": 0.01,
    "ms_win_length": 0.02,
    "ms_n_mels": 48,
    "ms_seg_length": 15,
    "ms_seg_hop_length": 4,
    "ms_max_segments": 1300,
    "cnn_model": "adapt",
    "cnn_c_out_1": 16,
    "cnn_c_out_2": 32,
    "cnn_c_out_3": 64,
    "cnn_kernel_size": [3, 3],
    "cnn_dropout": 0.2,
    "cnn_pool_1": [24, 7],
    "cnn_pool_2": [12, 5],
    "cnn_pool_3": [6, 3],
    "cnn_fc_out_h": None,
    "td": "self_att",
    "td_sa_d_model": 64,
    "td_sa_nhead": 1,
    "td_sa_pos_enc": False,
    "td_sa_num_layers": 2,
    "td_sa_h": 64,
    "td_sa_dropout": 0.1,
    "td_2": "skip",
    "pool": "att",
    "pool_att_h": 128,
    "pool_att_dropout": 0.1,
}


def build_random_nisqa(path: Path, *, naturalness: bool = False, seed: int = 0) -> Path:
    """A NISQA checkpoint ({'args', 'model_state_dict'}, as nisqa.tar) with random weights of the real architecture:
    torchmetrics' NISQA_DIM (five attention-pooling heads), or with `naturalness` the MOS-only model of
    nisqa_tts.tar (one head, `pool.*`), whose weights are the DIM model's first head (so its score equals the DIM
    model's overall MOS: the tests use that)."""
    import torch
    from torchmetrics.functional.audio.nisqa import _NISQADIM

    torch.manual_seed(seed)
    model = _NISQADIM(NISQA_ARGS).eval()
    with torch.no_grad():  # the five heads are deep copies of one: draw each its own weights, and spread them
        for head in model.pool_layers:
            for layer in head.modules():
                if isinstance(layer, torch.nn.Linear):
                    layer.reset_parameters()
            head.model.linear3.weight.mul_(5.0)
    state = model.state_dict()
    args = dict(NISQA_ARGS)
    if naturalness:
        args["model"] = "NISQA"
        state = {k: v for k, v in state.items() if not k.startswith("pool_layers.")} | {
            "pool." + k.removeprefix("pool_layers.0."): v for k, v in state.items() if k.startswith("pool_layers.0.")
        }
    torch.save({"args": args, "model_state_dict": state}, path)
    return path


def build_tiny_sherpa_speaker(
    path: Path, *, framework: str = "3d-speaker", metadata: dict[str, str] | None = None, seed: int = 0
) -> Path:
    """A speaker-embedding ONNX file in sherpa-onnx's format: input fbank (1, T, 80), output (1, 16), and the
    metadata sherpa-onnx reads (framework, output_dim, sample_rate, normalize_samples, language; CAM++'s
    global-mean feature normalisation for 3d-speaker). The network is a small x-vector shape with random weights:
    a frame-wise 80 -> 32 layer, mean and standard-deviation pooling over time, a 64 -> 16 projection. `metadata`
    replaces the defaults (a value None removes the key)."""
    import io

    import onnx
    import torch

    class XVector(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.frame = torch.nn.Linear(80, 32)
            self.project = torch.nn.Linear(64, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.frame(x))
            return self.project(torch.cat([h.mean(dim=1), h.std(dim=1)], dim=-1))

    torch.manual_seed(seed)
    buffer = io.BytesIO()
    torch.onnx.export(
        XVector().eval(),
        (torch.randn(1, 50, 80),),
        buffer,
        input_names=["x"],
        output_names=["embedding"],
        dynamic_axes={"x": {1: "T"}},
        dynamo=False,
        opset_version=17,
    )
    model = onnx.load_from_string(buffer.getvalue())
    meta = {
        "framework": framework,
        "output_dim": "16",
        "sample_rate": "16000",
        "normalize_samples": "1" if framework == "3d-speaker" else "0",
        "language": "English",
        **({"feature_normalize_type": "global-mean"} if framework == "3d-speaker" else {}),
    }
    for key, value in {**meta, **(metadata or {})}.items():
        if value is not None:
            entry = model.metadata_props.add()
            entry.key, entry.value = key, value
    onnx.save(model, path)
    return path


def build_random_ecapa(directory: Path) -> Path:
    """speechbrain/spkrec-ecapa-voxceleb's folder layout with random weights of its real ECAPA-TDNN (20.8 M weights,
    the hyperparams its model card declares): embedding_model.ckpt, the file the speechbrain-ecapa encoder reads."""
    import torch

    from ttseval.providers.speaker.speechbrain_ecapa import ECAPA, speechbrain_modules

    directory.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.save(speechbrain_modules()["ECAPA_TDNN"](**ECAPA).eval().state_dict(), directory / "embedding_model.ckpt")
    return directory


VOXLINGUA_LABELS = ["ps: Pashto", "ur: Urdu", "en: English", *[f"x{k:03d}: Language {k}" for k in range(104)]]


def build_random_voxlingua107(directory: Path) -> Path:
    """speechbrain/lang-id-voxlingua107-ecapa's folder layout with random weights of its real modules (ECAPA-TDNN on 60
    mels with a 256-d embedding, the x-vector classifier over 107 languages) and a label encoder in SpeechBrain's
    format (three real labels first, then 104 placeholders)."""
    import torch

    from ttseval.providers._speechbrain import speechbrain_modules
    from ttseval.providers.lid.speechbrain_lid import CLASSIFIER, ECAPA

    directory.mkdir(parents=True, exist_ok=True)
    sb = speechbrain_modules()
    torch.manual_seed(0)
    torch.save(sb["ECAPA_TDNN"](**ECAPA).eval().state_dict(), directory / "embedding_model.ckpt")
    classifier = sb["Classifier"](**CLASSIFIER).eval()
    with torch.no_grad():  # spread the logits, so the top class moves between clips
        classifier.out.w.weight.mul_(30.0)
    torch.save(classifier.state_dict(), directory / "classifier.ckpt")
    labels = sb["CategoricalEncoder"]()
    labels.expect_len(len(VOXLINGUA_LABELS))
    labels.load_or_create(directory / "label_encoder.txt", from_iterables=[VOXLINGUA_LABELS])
    return directory


SEEDTTS_SIM_SIZES = {
    "hidden": 32,
    "layers": 2,
    "heads": 4,
    "ffn": 64,
    "conv": 16,
    "pos_kernel": 16,
    "pos_groups": 4,
    "buckets": 320,
    "channels": 16,
    "scale": 8,
    "bottleneck": 8,
    "aggregate": 48,
    "attention": 8,
    "embedding": 12,
}
"""The small configuration build_random_seedtts_sim writes (WavLM-Large: 1024 wide, 24 layers, 16 heads, 4096
feed-forward, 512-channel convolutions, a positional convolution of 128 in 16 groups; the ECAPA head: 512 channels,
scale 8, SE bottleneck 128, 1536 aggregated, attention 128, 256-d)."""
SEEDTTS_SIM_LARGE = {
    "hidden": 1024,
    "layers": 24,
    "heads": 16,
    "ffn": 4096,
    "conv": 512,
    "pos_kernel": 128,
    "pos_groups": 16,
    "buckets": 320,
    "channels": 512,
    "scale": 8,
    "bottleneck": 128,
    "aggregate": 1536,
    "attention": 128,
    "embedding": 256,
}
"""The published checkpoint's sizes, as the comment above gives them (benchmarks/bench_predictors.py)."""


def build_random_seedtts_sim(path: Path, *, seed: int = 0, sizes: dict[str, int] | None = None) -> Path:
    """A checkpoint in the layout of UniSpeech's wavlm_large_finetune.pth ({'model': state dict}: WavLM's tensors
    under `feature_extract.model.` with fairseq's names, the ECAPA_TDNN head's at the top, the training loss's
    `loss_calculator.projection.weight` and WavLM's unused `mask_emb` besides) for `sizes` (SEEDTTS_SIM_SIZES unless
    given), with random weights scaled to keep activations near unit size. Written from tensor names alone, without
    the provider."""
    import torch

    s = sizes or SEEDTTS_SIM_SIZES
    g = torch.Generator().manual_seed(seed)

    def rand(*shape: int, scale: float = 1.0, offset: float = 0.0) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale + offset

    def linear(out: int, cin: int, *conv: int) -> dict[str, torch.Tensor]:
        fan_in = cin * (conv[0] if conv else 1)
        return {"weight": rand(out, cin, *conv, scale=fan_in**-0.5), "bias": rand(out, scale=0.1)}

    def norm(size: int, batch: bool = False) -> dict[str, torch.Tensor]:
        out = {"weight": rand(size, scale=0.1, offset=1.0), "bias": rand(size, scale=0.1)}
        if batch:
            out |= {
                "running_mean": rand(size, scale=0.1),
                "running_var": rand(size, scale=0.1).abs() + 0.5,
                "num_batches_tracked": torch.tensor(1000),
            }
        return out

    state: dict[str, torch.Tensor] = {}

    def put(prefix: str, tensors: dict[str, torch.Tensor]) -> None:
        state.update({f"{prefix}.{k}": v for k, v in tensors.items()})

    w = "feature_extract.model."
    h, c = s["hidden"], s["conv"]
    for i, kernel in enumerate((10, 3, 3, 3, 3, 2, 2)):  # conv_bias False, as WavLM-Large: no conv bias
        state[f"{w}feature_extractor.conv_layers.{i}.0.weight"] = rand(
            c, 1 if i == 0 else c, kernel, scale=(kernel * (1 if i == 0 else c)) ** -0.5
        )
        put(f"{w}feature_extractor.conv_layers.{i}.2.1", norm(c))
    put(f"{w}layer_norm", norm(c))
    put(f"{w}post_extract_proj", linear(h, c))
    state[f"{w}encoder.pos_conv.0.weight_v"] = rand(h, h // s["pos_groups"], s["pos_kernel"])
    state[f"{w}encoder.pos_conv.0.weight_g"] = rand(1, 1, s["pos_kernel"], scale=0.1, offset=1.0)
    state[f"{w}encoder.pos_conv.0.bias"] = rand(h, scale=0.1)
    for n in range(s["layers"]):
        layer = f"{w}encoder.layers.{n}"
        for proj in ("k_proj", "v_proj", "q_proj", "out_proj"):
            put(f"{layer}.self_attn.{proj}", linear(h, h))
        put(f"{layer}.self_attn.grep_linear", linear(8, h // s["heads"]))
        state[f"{layer}.self_attn.grep_a"] = rand(1, s["heads"], 1, 1, scale=0.1, offset=1.0)
        if n == 0:
            state[f"{layer}.self_attn.relative_attention_bias.weight"] = rand(s["buckets"], s["heads"], scale=0.5)
        put(f"{layer}.self_attn_layer_norm", norm(h))
        put(f"{layer}.fc1", linear(s["ffn"], h))
        put(f"{layer}.fc2", linear(h, s["ffn"]))
        put(f"{layer}.final_layer_norm", norm(h))
    put(f"{w}encoder.layer_norm", norm(h))
    state[f"{w}mask_emb"] = rand(h)
    state["feature_weight"] = rand(s["layers"] + 1)
    ch, width = s["channels"], s["channels"] // s["scale"]
    put("layer1.conv", linear(ch, h, 5))
    put("layer1.bn", norm(ch, batch=True))
    for block in ("layer2", "layer3", "layer4"):
        for part in ("Conv1dReluBn1", "Conv1dReluBn2"):
            put(f"{block}.{part}.conv", linear(ch, ch, 1))
            put(f"{block}.{part}.bn", norm(ch, batch=True))
        for k in range(s["scale"] - 1):
            put(f"{block}.Res2Conv1dReluBn.convs.{k}", linear(width, width, 3))
            put(f"{block}.Res2Conv1dReluBn.bns.{k}", norm(width, batch=True))
        put(f"{block}.SE_Connect.linear1", linear(s["bottleneck"], ch))
        put(f"{block}.SE_Connect.linear2", linear(ch, s["bottleneck"]))
    put("conv", linear(s["aggregate"], 3 * ch, 1))
    put("pooling.linear1", linear(s["attention"], s["aggregate"], 1))
    put("pooling.linear2", linear(s["aggregate"], s["attention"], 1))
    put("bn", norm(2 * s["aggregate"], batch=True))
    put("linear", linear(s["embedding"], 2 * s["aggregate"]))
    state["loss_calculator.projection.weight"] = rand(5, s["embedding"])
    torch.save({"model": state}, path)
    return path


VITS_RATE_HZ = 8000


def build_tiny_vits(path: Path, *, language: str | None = "eng", num_speakers: int = 1) -> Path:
    """A random VITS with MMS-TTS's tokenizer layout (characters, blanks between them, tokenizer_config language)."""
    import torch
    from transformers import VitsConfig, VitsModel, VitsTokenizer

    path.mkdir(parents=True, exist_ok=True)
    chars = list("abcdefghijklmnopqrstuvwxyz '")
    vocab = {"<pad>": 0, **{c: i + 1 for i, c in enumerate(chars)}, "<unk>": len(chars) + 1}
    vocab_file = path / "source-vocab.json"
    vocab_file.write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = VitsTokenizer(str(vocab_file), language=language, add_blank=True, normalize=True, phonemize=False)
    config = VitsConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        ffn_dim=16,
        flow_size=8,
        spectrogram_bins=9,
        upsample_initial_channel=16,
        upsample_rates=(4, 4),
        upsample_kernel_sizes=(8, 8),
        resblock_kernel_sizes=(3,),
        resblock_dilation_sizes=((1,),),
        duration_predictor_filter_channels=8,
        duration_predictor_num_flows=2,
        prior_encoder_num_flows=2,
        prior_encoder_num_wavenet_layers=1,
        posterior_encoder_num_wavenet_layers=1,
        depth_separable_num_layers=1,
        sampling_rate=VITS_RATE_HZ,
        num_speakers=num_speakers,
        speaker_embedding_size=4 if num_speakers > 1 else 0,
    )  # noise_scale 0.667 and noise_scale_duration 0.8: MMS-TTS's defaults, so the noise path is exercised
    torch.manual_seed(0)
    VitsModel(config).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path
