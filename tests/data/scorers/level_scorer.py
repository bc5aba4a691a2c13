"""A scorer for the ttseval-scorer/1 protocol (providers/quality/command.py), run by the tests in a second venv
that holds only the standard library and `tinylevel` (a package the tests build; the main environment lacks it).
Score: the clip's RMS level in dBFS, computed by tinylevel, mapped onto the MOS scale (-60 dBFS and below 1,
0 dBFS 5); details: the RMS and peak levels and the duration. Clips under
200 ms are refused. `--crash` fails every score request after writing to stderr; `--hang` sleeps instead. As a
recogniser (op transcribe) it says how long each clip is, in the language of the clip's hint."""

import json
import sys
import time
import wave
from array import array

import tinylevel  # only in the scorer's own venv

request = json.load(sys.stdin)
assert request["protocol"] == "ttseval-scorer/1", request
if request["op"] == "describe":
    print(json.dumps({"version": f"level-{tinylevel.__version__}", "model": "rms-dbfs", "prefix": sys.prefix}))
    sys.exit(0)
if "--crash" in sys.argv:
    print("loading the level model", file=sys.stderr)
    raise RuntimeError("the level model is corrupt (a test crash)")
if "--hang" in sys.argv:
    print("waiting for a GPU that never frees", file=sys.stderr, flush=True)
    time.sleep(600)
if request["op"] == "transcribe":  # a stand-in recogniser: says how long the clip is, in the hinted language
    for clip in request["clips"]:
        words = {"en": "a clip of {} milliseconds", "zh": "{} 毫秒"}.get(clip["language"], "{}")
        print(
            json.dumps(
                {
                    "id": clip["id"],
                    "text": words.format(round(clip["duration_s"] * 1000)),
                    "language": clip["language"],
                    "language_prob": 1.0 if clip["language"] else None,
                }
            )
        )
    sys.exit(0)
print("scoring", len(request["clips"]), "clips", file=sys.stderr)
for clip in request["clips"]:
    with wave.open(clip["path"]) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1
        samples = array("h", w.readframes(w.getnframes()))
    if clip["duration_s"] < 0.2:
        print(json.dumps({"id": clip["id"], "error": f"clip shorter than 200 ms ({clip['duration_s'] * 1000:.0f} ms)"}))
        continue
    values = [s / 32768.0 for s in samples]
    rms = tinylevel.rms_dbfs(values)
    print(
        json.dumps(
            {
                "id": clip["id"],
                "score": min(5.0, max(1.0, 5 + rms / 15)),
                "details": {
                    "rms_dbfs": rms,
                    "peak_dbfs": tinylevel.peak_dbfs(values),
                    "duration_s": clip["duration_s"],
                },
            }
        )
    )
