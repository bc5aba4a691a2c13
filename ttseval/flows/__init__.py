"""Prefect flows, each one of the papers' pipelines composed from the tasks in ttseval.tasks:

    evaluate               synthesize -> transcribe, MOS, LID, prosody, similarity -> judge -> report
    nightly                a dated evaluate run plus drift and a comparison against the previous night
    backfill_judge         a new judge over the audio an earlier run stored
    generate_dataset       EmergentTTS-Eval's breadth expansion and depth refinement of seed prompts by an LLM
    generate_instructions  InstructTTSEval's APS/DSD/RP instructions from captioned reference audio
    human_eval             listening tests (Rethinking MUSHRA): export, ingest, analyse

Also here: the evaluate preflight (preflight.py), the Dask task runner built from settings (runner.py), stage
progress (progress.py) and the helpers the flows share (common.py). Deployments name these flows by module path
(deployments/prefect.yaml: `ttseval.flows.evaluate:evaluate`).
"""
