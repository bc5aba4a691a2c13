"""Speaker-verification encoders for speaker similarity (SIM): one embedding per clip."""
