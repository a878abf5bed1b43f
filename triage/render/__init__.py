"""A Report turned into text: markdown.py (+ templates/) for people, json_out.py for machines.
Renders only what the Report holds; imports core and nothing above it."""
