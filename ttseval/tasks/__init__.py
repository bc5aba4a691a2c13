"""The stages and what they write: Prefect tasks over shards of keys, and the store-facing work they call.

Each Prefect task handles one shard of one stage by calling a plain function in this package, which reads the
store, calls providers, computes metrics (ttseval.metrics) and commits one part: `synthesize_items` for
synthesis, `run_stage` for every clip stage declared in stages.py (transcripts, quality, lid, prosody,
similarity), one loop over `JudgeKind` declarations for the judges (judge.py, judge_instructions.py). The functions are
tested without Prefect; the tasks wrapping them add retries and logging, and return a summary (StageResult),
never audio or tables. Alongside the stages: planning (what is missing), cost and budgets, vendor limits, voice
prompts, dataset and instruction generation (generate.py, generate_instructions.py), reports (report/),
listening tests (listening/), exports and the leaderboard.
"""
