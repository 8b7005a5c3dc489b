"""The agent: GEAK's generator → judge → reflector → optimizer loop.

Modules, one job each: `brief` (what prompts say about a task), `prompts` (the jinja2 templates),
`generator`, `reflector`, `optimizer` (build a prompt, call the LLM, parse the answer), `answers`
(parsing untrusted answers), `calls` (one accounted LLM call), `memory` (immutable attempts),
`retrieval` (1-shot examples by code similarity), `knowledge` (the Triton guide and GPU specs),
`budget`, `loop` (one task-run), `session` (many task-runs at once), `results` (what a run
produced) and `app` (wiring for the commands). See docs/agent.md.
"""
