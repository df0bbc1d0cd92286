"""The config room, at the bottom of the layers: the typed schema, the checks the config alone
decides (`validation`) and those of the hardware (`resources`), and loading (resolve once on the
driver; the saved config for resume). It imports nothing above it, and neither Ray nor torch at
import time."""
