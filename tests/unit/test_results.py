"""The run directory's tables, without Ray."""

from __future__ import annotations

import pandas as pd

from hfsweep.driver.results.tables import markdown


def test_markdown_keeps_a_trial_id_of_digits_as_text():
    """Tune's trial ids are 5 hex digits, all decimal about one time in ten: '12345_00000' must
    not become a right-aligned number (float() reads the underscore as a digit separator)."""
    table = pd.DataFrame(
        {
            "trial_id": ["12345_00000", "12345_00001"],
            "training.learning_rate": [1e-3, 2e-5],
            "ended": ["completed", "completed"],
        }
    )
    lines = markdown(table).splitlines()
    assert lines[0].startswith("| trial_id ") and lines[1].startswith("|:---")
    assert lines[2].startswith("| 12345_00000 |") and lines[2].endswith(" 0.001 | completed |")
