"""The coordinator: runs in the trusted process (the CLI or the agent). The static stage (AST
only), the pool of workers, submission and verdicts. Never imports candidate code."""
