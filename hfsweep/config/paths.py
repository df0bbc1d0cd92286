"""Dotted paths (`training.learning_rate`) into the nested dicts that a resolved config, a search
space and Tune's param space are: the one walker for code that reads or writes a value by its path."""

from __future__ import annotations

from typing import Any


def get_path(tree: dict, path: str) -> Any:
    """The value at `path`; KeyError names the first part that is missing."""
    for part in path.split("."):
        tree = tree[part]
    return tree


def set_path(tree: dict, path: str, value: Any) -> None:
    """Set the value at `path`, making the dicts above it that are missing."""
    *parents, leaf = path.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[leaf] = value


def nested(dotted: dict) -> dict:
    """{"training.learning_rate": v} as {"training": {"learning_rate": v}}: the shape of the config.
    (Tune's samplers are not values OmegaConf can hold, so `OmegaConf.update` cannot build it.)"""
    tree: dict = {}
    for path, value in dotted.items():
        set_path(tree, path, value)
    return tree
