"""HTTP plumbing under every route: reading bodies, answering JSON and SSE, draining,
errors, request ids, resource limits, and the uvicorn protocol classes."""
