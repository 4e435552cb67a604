"""PDF question answering with evidence: the pipeline (no UI code here)."""
