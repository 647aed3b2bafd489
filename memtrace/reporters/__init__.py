"""Reporters: each renders one analysis result to a text stream (text or JSON); none opens files."""
