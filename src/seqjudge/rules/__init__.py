"""Rule model, loading, linting and the deterministic engine."""
