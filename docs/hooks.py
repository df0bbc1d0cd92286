"""MkDocs hook: the files that live beside the code join the site at the same paths, so their
relative links work in both places: `BENCHMARKS.md`, `benchmarks/README.md` and everything under
`experiments/` that a page shows or links (markdown, pictures, csv). A folder the experiments link
to without a README of its own gets a generated page listing its files.

Links into the old one-page README (`../../README.md#task-families`) point at the site's page now
holding that section (`MOVED`)."""

from __future__ import annotations

import os
import re

from mkdocs.structure.files import File, Files

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDED = ("BENCHMARKS.md", "benchmarks/README.md")
TREES = ("experiments",)
SUFFIXES = (".md", ".png", ".csv", ".svg")
MOVED = {"task-families": "tasks.md"}  # README anchor -> the docs page holding that section


def repo_files() -> list[str]:
    paths = [p for p in INCLUDED if os.path.exists(os.path.join(ROOT, p))]
    for tree in TREES:
        for folder, _, names in os.walk(os.path.join(ROOT, tree)):
            paths += [os.path.relpath(os.path.join(folder, n), ROOT) for n in sorted(names) if n.endswith(SUFFIXES)]
    return paths


def holds_shown_files(folder: str) -> bool:
    """Whether the site shows a file of `folder` or of a folder below it."""
    return any(n.endswith(SUFFIXES) for _, _, names in os.walk(folder) for n in names)


def folder_listing(folder: str) -> str:
    """A page for a folder without a README: its files and the subfolders the site shows, linked."""
    entries = sorted(os.listdir(os.path.join(ROOT, folder)))
    lines = [f"# {folder}/", "", "The files of this folder of the repository:", ""]
    for name in entries:
        path = os.path.join(ROOT, folder, name)
        if os.path.isdir(path) and holds_shown_files(path):
            lines.append(
                f"- [{name}/]({name}/index.md)"
                if not os.path.exists(os.path.join(path, "README.md"))
                else f"- [{name}/]({name}/README.md)"
            )
        elif name.endswith(SUFFIXES):
            lines.append(f"- [{name}]({name})")
    return "\n".join(lines) + "\n"


def on_files(files: Files, config) -> Files:
    for path in repo_files():
        files.append(File.generated(config, path, abs_src_path=os.path.join(ROOT, path)))
    for tree in TREES:
        for folder, _, names in os.walk(os.path.join(ROOT, tree)):
            rel = os.path.relpath(folder, ROOT)
            if rel != tree and "README.md" not in names and holds_shown_files(folder):
                files.append(File.generated(config, f"{rel}/index.md", content=folder_listing(rel)))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """In an included file: a link to a folder goes to its README (or its generated listing), as
    GitHub shows a folder; a link to a section of the old one-page README, to the page holding it."""
    depth = page.file.src_uri.count("/")
    here = os.path.dirname(page.file.src_uri)

    def folder(match: re.Match) -> str:
        target = os.path.normpath(os.path.join(ROOT, here, match.group(1)))
        if not os.path.isdir(target) or not page.file.abs_src_path.startswith(ROOT + os.sep + TREES[0]):
            return match.group(0)
        name = "README.md" if os.path.exists(os.path.join(target, "README.md")) else "index.md"
        return f"]({match.group(1)}{name}{match.group(2) or ''})"

    markdown = re.sub(r"\]\(((?!https?:)[\w./-]*/)(#[\w-]+)?\)", folder, markdown)

    def moved(match: re.Match) -> str:
        target = MOVED.get(match.group(2))
        if target is None:
            return match.group(0)
        return f"]({'../' * depth}{target})"

    return re.sub(r"\]\(((?:\.\./)*README\.md)#([\w-]+)\)", moved, markdown)
