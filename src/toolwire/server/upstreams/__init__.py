"""The upstream models behind the public model ids: clients and routing."""
