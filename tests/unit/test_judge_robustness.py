"""Parse robustness of the LLM judges (issue: no more than 0.5% of pairs unparsed when the answers are malformed
the ways real models fail). The real google-genai client against tests/support/fake_gemini.py; the shared path is
providers/llm/base.py (structured output, a re-ask quoting the parse error, prose extraction last)."""

from __future__ import annotations

import json
import re
from collections import Counter

from tests.support.fake_gemini import PAIRWISE_OK, REFUSAL_TEXT, FakeGemini, Reply
from tests.support.judge_requests import judge, pair

N_PAIRS = 400
WINNERS = ("clip_1", "clip_2", "tie")
MODES = ("json", "json", "json", "json", "prose around", "code fence", "truncated", "words only", "refusal", "json")


def intended(k: int) -> str:
    return WINNERS[k % 3]


def respond(request) -> Reply:
    """Pair k answers in mode MODES[k % 10]; pair 7 never answers anything usable. A re-ask (its text quotes why
    the last answer failed) gets valid JSON, as a model told its mistake usually gives."""
    k = int(re.search(r"<item-(\d+)>", request.text()).group(1))
    good = json.dumps(PAIRWISE_OK | {"winner": intended(k)})
    if k == 7:
        return Reply.ok("I am unable to compare these recordings in a useful way.")
    if "Your previous answer could not be used:" in request.text():
        return Reply.ok(good)
    mode = MODES[k % 10]
    words = {
        "clip_1": "Clip 1 is clearly better here.",
        "clip_2": "Overall, the winner is Clip 2.",
        "tie": "Honestly, it's a tie: both handle the question well.",
    }[intended(k)]
    return Reply.ok(
        {
            "json": good,
            "prose around": f"Sure! Here is my verdict after listening twice:\n{good}\nLet me know if you need more.",
            "code fence": f"```json\n{good}\n```",
            "truncated": good[: good.index('"difference"')],  # a MAX_TOKENS stop before the verdict
            "words only": f"Both clips are intelligible. {words}",
            "refusal": REFUSAL_TEXT,
        }[mode]
    )


def test_malformed_answers_end_parsed_with_the_intended_verdict_and_the_rest_counted_unparsed() -> None:
    with FakeGemini(responder=respond) as fake:
        verdicts = judge(fake, concurrency="8").judge_pairs([pair(k) for k in range(N_PAIRS)])
        reasks = [r.text() for r in fake.requests if "Your previous answer could not be used:" in r.text()]
    unparsed = [k for k, v in enumerate(verdicts) if not v.parse_ok]
    assert len(unparsed) / N_PAIRS <= 0.005 and unparsed == [7]
    assert verdicts[7].winner is None and verdicts[7].attempts == 3  # counted unparsed, never a tie
    mapped = {"clip_1": "first", "clip_2": "second", "tie": "tie"}
    assert all(v.winner == mapped[intended(k)] for k, v in enumerate(verdicts) if k != 7)
    # which path parsed each mode: JSON (repaired where needed) on the first answer; truncated, refused and
    # words-only answers on the re-ask that quoted the error (extraction from words comes last: next test)
    attempts = Counter((MODES[k % 10], v.attempts) for k, v in enumerate(verdicts) if k != 7)
    assert {mode for mode, n in attempts if n == 1} == {"json", "prose around", "code fence"}
    assert {mode for mode, n in attempts if n == 2} == {"truncated", "refusal", "words only"}
    # the re-ask tells the model what was wrong
    assert any("does not match the PairwiseAnswer schema" in r for r in reasks)
    assert any("no JSON object in the response" in r for r in reasks)


def test_a_verdict_in_words_on_every_attempt_is_extracted_last() -> None:
    with FakeGemini(responder=lambda r: Reply.ok("After two listens: Clip 2 is noticeably better.")) as fake:
        [v] = judge(fake).judge_pairs([pair(0)])
        assert fake.total_requests == 3  # structured output and two re-asks came first
    assert v.parse_ok and v.winner == "second" and v.score_first is None and v.score_second is None
    with FakeGemini(responder=lambda r: Reply.ok("Clip 1 is better. No wait, clip 2 wins.")) as fake:
        [v] = judge(fake).judge_pairs([pair(1)])
    assert not v.parse_ok and v.winner is None  # words that disagree are not a verdict
