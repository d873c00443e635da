"""The conversation runtime: the agent's side of a live call (``session``), what it runs (``config``), the tools
the model may call (``tools``), knowledge in the call (``knowledge``), the after-call analysis (``analysis``).

Pure application code over ports: the media session (``application/ports/media.py``), the engines
(``application/ports/engines.py``), the SSRF-safe egress and units of work. Modules are imported directly (this
package re-exports nothing).
"""
