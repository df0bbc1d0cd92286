"""Tables in a run directory's files, kept light: the multirun summary (a Hydra callback that
Hydra loads before any job) uses them without pandas' plotting or Ray."""

from __future__ import annotations


def markdown(table) -> str:
    """The table in Markdown, text columns kept as text: tabulate reads a trial id made of digits
    ('12345_00000': Python's float() takes underscores) as a number. (pandas' `to_markdown` shifts
    `disable_numparse`'s column indices by one, hence tabulate itself.)"""
    import pandas as pd
    from tabulate import tabulate

    text_columns = [i for i, column in enumerate(table.columns) if not pd.api.types.is_numeric_dtype(table[column])]
    return tabulate(table, headers="keys", tablefmt="pipe", showindex=False, disable_numparse=text_columns) + "\n"
