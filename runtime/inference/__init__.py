"""The model behind every decision: the protocol, llama.cpp locally or over HTTP, the model files."""
