"""The model stage: the OpenAI-compatible client, the tool protocols on the wire, the embedded llama-server, its
thread plan, the pool of endpoints a sweep shares, and the non-neural controls that stand in for a model."""
