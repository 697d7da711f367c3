"""Recall: lexical and semantic search, and the context blocks handed back to the agent."""
