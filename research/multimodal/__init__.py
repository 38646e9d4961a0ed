"""The multimodal lab: the simulated MLLM with a planted position bias, and the run on it; see research/README.md."""
