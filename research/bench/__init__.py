"""One-off decision scripts (run as files: ``python research/bench/NAME.py``); see research/README.md."""
