"""Spoken language identification (LID) of synthesized clips: the V gate of INSV-A (PashtoTTS-Bench 3.4)."""
