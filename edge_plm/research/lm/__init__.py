"""The desktop SAFFU next-token language model: configurations, model, warm start, streaming corpus and trainer."""
