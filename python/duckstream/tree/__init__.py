"""The operator tree: each relational operator owns its delta rule (one module each)."""
