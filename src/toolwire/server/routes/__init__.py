"""toolwire's own REST routes and the probes: `tools`, `runs` (approvals, runs, audit),
`probes`."""
