"""Which execution rows hold a file's final verdict (schema step 4's data migration).

Before step 4 every attempt was a row and nothing said which one was the verdict. A
row is an attempt that was retried exactly when the next row of the same (stage,
file) is the next attempt (``attempt + 1``) of the same CI run and commit and the row
did not pass (a passing attempt is never retried); every other row is final. The rows
are read once in (stage, file, time) order and updated in chunks.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy import Connection

PASSING = ("PASSED", "FLAKY")
_CHUNK = 500


def retried_ids(rows: list[tuple[int, str, str, int, str, str | None, str | None]]) -> set[int]:
    """Pure: ids of retried attempts among rows ``(id, stage, file, attempt, outcome,
    commit, ci_run_id)`` sorted by (stage, file, time, id)."""
    out: set[int] = set()
    for row, nxt in itertools.pairwise(rows):
        rid, stage, file, attempt, outcome, commit, run = row
        _, n_stage, n_file, n_attempt, _, n_commit, n_run = nxt
        if ((stage, file, commit, run) == (n_stage, n_file, n_commit, n_run)
                and n_attempt == attempt + 1 and outcome not in PASSING):
            out.add(rid)
    return out


def mark_final(conn: Connection) -> None:
    from sqlalchemy import select, update

    from testfleet.store.tables import executions as ex

    rows = [tuple(r) for r in conn.execute(
        select(ex.c.id, ex.c.stage, ex.c.file, ex.c.attempt, ex.c.outcome, ex.c.commit_sha,
               ex.c.ci_run_id).order_by(ex.c.stage, ex.c.file, ex.c.ts, ex.c.id))]
    retried = retried_ids(rows)
    ids = [r[0] for r in rows]
    for value, chosen in ((False, [i for i in ids if i in retried]),
                          (True, [i for i in ids if i not in retried])):
        for i in range(0, len(chosen), _CHUNK):
            conn.execute(update(ex).where(ex.c.id.in_(chosen[i:i + _CHUNK])).values(final=value))
