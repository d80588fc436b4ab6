"""The front doors: one package per protocol, each a thin translator between its wire
format and the agent core (requests → `Agent` runs → events → responses and streams).
Nothing about tools lives here."""
