"""The config room: the typed schema, every user-facing validation error, and loading (resolve
once on the driver; the saved config for resume). Nothing here imports Ray or torch at import time."""
