"""The catalogue's data layer: pydantic models of signatures and workarounds (models.py), the
YAML loader (load.py) and the engines' flag lists (flags.py, data/). Imports only core."""
