"""One module per format family; each exposes `make_parser(name, tools, prompt_suffix)`."""
