"""The local audio-LLM judge against a tiny random Qwen2-Audio model built offline (nothing is downloaded).

Random weights answer garbage, so every verdict is a parse failure; the tests pin what the judge does around
the model: the conversation it builds (its raw response must equal an independent greedy decode of the same
conversation), token accounting, retries, per-item failures and the judge_id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ttseval.core.audio import Audio
from ttseval.core.protocols import InstructionRequest, PairwiseRequest
from ttseval.providers.judges.prompts import instruction_prompt, pairwise_prompt, rubric_for
from ttseval.providers.judges.transformers_judge import TransformersAudioJudge

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"]

# Qwen2-Audio-7B-Instruct's chat template: each audio entry becomes "Audio N: <|audio_bos|><|AUDIO|><|audio_eos|>".
CHAT_TEMPLATE = (
    "{% set audio_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}"
    "{% for content in message['content'] %}"
    "{% if 'audio' in content or 'audio_url' in content or content['type'] == 'audio' %}"
    "{% set audio_count.value = audio_count.value + 1 %}"
    "Audio {{ audio_count.value }}: <|audio_bos|><|AUDIO|><|audio_eos|>\n"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
MAX_NEW_TOKENS = "12"


@pytest.fixture(scope="module")
def tiny_qwen2_audio_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Qwen2-Audio model with a 1-layer 16-wide audio encoder and a 1-layer 32-wide Qwen2 decoder, a byte-level
    tokenizer with no merges (256 byte symbols plus the chat and audio special tokens), a 128-bin Whisper feature
    extractor and the Instruct chat template, saved the way a real checkpoint is."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (
        PreTrainedTokenizerFast,
        Qwen2AudioConfig,
        Qwen2AudioForConditionalGeneration,
        Qwen2AudioProcessor,
        WhisperFeatureExtractor,
    )

    directory = tmp_path_factory.mktemp("tiny-qwen2-audio")
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    for symbol in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(SPECIAL_TOKENS)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    extractor = WhisperFeatureExtractor(feature_size=128, sampling_rate=16000)
    processor = Qwen2AudioProcessor(feature_extractor=extractor, tokenizer=tokenizer, chat_template=CHAT_TEMPLATE)
    config = Qwen2AudioConfig(
        audio_config={
            "model_type": "qwen2_audio_encoder",
            "d_model": 16,
            "encoder_layers": 1,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 32,
            "num_mel_bins": 128,
            "max_source_positions": 1500,
            "initializer_range": 1.0,
        },
        text_config={
            "model_type": "qwen2",
            "vocab_size": len(vocab),
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 4096,
            "initializer_range": 1.0,
            "eos_token_id": vocab["<|im_end|>"],
            "pad_token_id": 0,
        },
        audio_token_index=vocab["<|AUDIO|>"],
    )
    # With the usual 0.02 init the greedy output of so small a model ignores its input; at 1.0 it changes with
    # the prompt, the clips and their order, so the exact-match test below notices a wrong conversation.
    torch.manual_seed(0)
    Qwen2AudioForConditionalGeneration(config).eval().save_pretrained(directory)
    processor.save_pretrained(directory)
    return directory


def _sine(rate_hz: int, duration_s: float, freq_hz: float) -> Audio:
    t = np.arange(int(rate_hz * duration_s)) / rate_hz
    samples = 0.5 * np.sin(2 * np.pi * freq_hz * t) * np.linspace(0.2, 1.0, t.size)
    return Audio(samples=samples.astype(np.float32), sample_rate_hz=rate_hz)


def _pair(item_id: str, text: str, category: str = "questions") -> PairwiseRequest:
    # 22.05 kHz: the judge must resample to the feature extractor's 16 kHz
    return PairwiseRequest(
        item_id=item_id,
        text=text,
        language="en",
        category=category,
        rubric=rubric_for(category),
        first=_sine(22050, 0.6, 440.0),
        second=_sine(22050, 0.4, 220.0),
        first_signals={"cer": 0.0},
    )


def _independent_decode(directory: Path, content: list[dict[str, Any]], clips: list[Audio]) -> tuple[str, int]:
    """Greedy decode of one user turn, built here without the judge: (new text, prompt length in tokens)."""
    import librosa
    import torch
    from transformers import Qwen2AudioForConditionalGeneration, Qwen2AudioProcessor

    model = Qwen2AudioForConditionalGeneration.from_pretrained(directory).eval()
    processor = Qwen2AudioProcessor.from_pretrained(directory)
    text = processor.apply_chat_template(
        [{"role": "user", "content": content}], add_generation_prompt=True, tokenize=False
    )
    arrays = [librosa.resample(c.samples, orig_sr=c.sample_rate_hz, target_sr=16000) for c in clips]
    inputs = processor(text=text, audio=arrays, sampling_rate=16000, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=int(MAX_NEW_TOKENS), do_sample=False)
    n_prompt = inputs["input_ids"].shape[1]
    return processor.tokenizer.decode(out[0, n_prompt:], skip_special_tokens=True), n_prompt


def test_pairs_match_an_independent_greedy_decode(tiny_qwen2_audio_dir: Path) -> None:
    batch = [_pair("q1", "Is it raining? No, it is not."), _pair("q2", "Where are you going?")]
    judge = TransformersAudioJudge(str(tiny_qwen2_audio_dir), max_new_tokens=MAX_NEW_TOKENS)
    verdicts = judge.judge_pairs(batch)
    assert len(verdicts) == len(batch)
    for request, verdict in zip(batch, verdicts):
        content = [
            {"type": "text", "text": pairwise_prompt(request.text, request.category, request.rubric) + "\n\nClip 1: "},
            {"type": "audio"},
            {"type": "text", "text": "Clip 2: "},
            {"type": "audio"},
        ]
        expected, n_prompt = _independent_decode(tiny_qwen2_audio_dir, content, [request.first, request.second])
        assert verdict.raw_response == expected
        assert (verdict.parse_ok, verdict.winner, verdict.attempts, verdict.retries) == (False, None, 1, 0)
        assert verdict.error  # the parser's reason
        assert verdict.input_tokens == n_prompt > 0
        assert 0 < verdict.output_tokens <= int(MAX_NEW_TOKENS)
        assert verdict.cost_usd == 0.0
    assert judge.judge_pairs([]) == []


def test_instructions_match_an_independent_greedy_decode(tiny_qwen2_audio_dir: Path) -> None:
    request = InstructionRequest(
        item_id="i1",
        text="Good morning.",
        language="en",
        instruction="Speak slowly, in a deep and calm voice.",
        task="APS",
        audio=_sine(24000, 0.5, 330.0),
    )
    judge = TransformersAudioJudge(str(tiny_qwen2_audio_dir), max_new_tokens=MAX_NEW_TOKENS)
    [verdict] = judge.judge_instructions([request])
    content = [
        {
            "type": "text",
            "text": instruction_prompt(request.text, request.instruction, request.task) + "\n\nRecording: ",
        },
        {"type": "audio"},
    ]
    expected, n_prompt = _independent_decode(tiny_qwen2_audio_dir, content, [request.audio])
    assert (verdict.raw_response, verdict.input_tokens) == (expected, n_prompt)
    assert (verdict.follows, verdict.parse_ok, verdict.attempts) == (None, False, 1)
    assert verdict.output_tokens > 0


def test_sampling_retries_and_a_failed_item_does_not_stop_the_batch(
    tiny_qwen2_audio_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    torch.manual_seed(1)
    judge = TransformersAudioJudge(str(tiny_qwen2_audio_dir), max_new_tokens="4", temperature="1.0", max_attempts="2")
    model, _ = judge._load()
    calls = {"n": 0}
    real_generate = model.generate

    def generate_failing_on_call_3(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:  # the first attempt of the second item
            raise RuntimeError("CUDA out of memory (injected)")
        return real_generate(*args, **kwargs)

    monkeypatch.setattr(model, "generate", generate_failing_on_call_3)
    first, failed, third = judge.judge_pairs([_pair("a", "One."), _pair("b", "Two."), _pair("c", "Three.")])
    # sampling: an unparseable answer is asked again, up to max_attempts
    assert (first.parse_ok, first.attempts, first.retries) == (False, 2, 1)
    assert 2 <= first.output_tokens <= 8 and first.input_tokens > 0
    assert failed.parse_ok is False and failed.raw_response is None
    assert "'b'" in failed.error and "injected" in failed.error
    assert (third.parse_ok, third.attempts) == (False, 2) and third.raw_response is not None


def test_judge_id_metadata_and_bad_models(tiny_qwen2_audio_dir: Path, tmp_path: Path) -> None:
    path = str(tiny_qwen2_audio_dir)
    base = TransformersAudioJudge(path)
    assert base.judge_id.startswith("transformers-judge-tiny-qwen2-audio")
    assert TransformersAudioJudge(path).judge_id == base.judge_id
    assert TransformersAudioJudge(path, max_new_tokens="256").judge_id != base.judge_id
    assert TransformersAudioJudge(path, temperature="0.7").judge_id != base.judge_id
    assert TransformersAudioJudge(model=path).judge_id == base.judge_id
    assert base.metadata()["options"]["max_new_tokens"] == 512 and not base._model.loaded  # lazy
    missing = tmp_path / "nothing-here"
    with pytest.raises(ValueError, match="nothing-here"):
        TransformersAudioJudge(str(missing))
    with pytest.raises(ValueError, match="no-such-org/no-such-model"):
        TransformersAudioJudge("no-such-org/no-such-model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no config.json"):
        TransformersAudioJudge(str(tmp_path / "empty"))
    (tmp_path / "whisper").mkdir()
    (tmp_path / "whisper" / "config.json").write_text('{"model_type": "whisper"}')
    with pytest.raises(ValueError, match="'whisper' model"):
        TransformersAudioJudge(str(tmp_path / "whisper"))
    with pytest.raises(ValueError, match="needs a model"):
        TransformersAudioJudge()
    with pytest.raises(ValueError, match="'beams'"):
        TransformersAudioJudge(path, beams="2")
