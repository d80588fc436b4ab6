"""The gateway's configuration: the `toolwire.yaml` model (`config`) and reading it (`loader`)."""
