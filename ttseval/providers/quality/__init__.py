"""Reference-free quality (MOS) predictors."""
