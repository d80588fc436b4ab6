"""What an operator sees: metrics, the access log and the log format."""
