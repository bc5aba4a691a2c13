"""Text-to-speech providers: espeak-ng and flite (command-line engines) and Piper (neural, ONNX)."""
