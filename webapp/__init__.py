"""The web app's helpers: small, testable logic behind the thin Gradio UI in ``app.py``."""
