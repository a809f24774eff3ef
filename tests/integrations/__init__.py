"""Framework adapter tests (Lightning, Accelerate, Hugging Face): tiny models trained on the CPU."""
