"""The LLM judge: prompt, providers, validated output with re-ask."""
