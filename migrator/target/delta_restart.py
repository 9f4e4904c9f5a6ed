"""invalidCheckpointBehavior: restart into a Delta table: empty it in one commit, then copy and replicate anew.

Both the snapshot's segments and the replication's batches are made idempotent by application
transaction ids (`migrator.target.delta`). A restart cannot reuse them: the copy's segment ids are found
committed (the re-copy would be skipped, and the table would keep what the lost changes left in it), and
Spark numbers the batches of the new checkpoint from 0 again, below the version the table holds.

So a restart is a new *generation* of the table's contents. Its first step is one commit that removes
every row (an overwrite with no rows), tagged with the application transaction `<appName>-restart`,
version n for the n-th restart. The table records its own generation that way, and every run reads it:
generation n's segments use the copy id `<savepoint name>-restart-n`, its batches the app id
`<appName>-restart-n`. Generation 0 (no restart ever) keeps the plain ids, as tables written before.

A restart is recorded as owed beside the savepoint (`migrator.run`) before the emptying commit, and
settled only once the savepoint and the checkpoint are dropped and the new replay start is recorded: a
run stopped anywhere in between restarts once more (another empty commit, then the copy). And a
savepoint's segments count as copied only where their commits are in the current generation, so a
savepoint that outlived an emptying copies nothing less. No row is copied twice, and none of the old
contents is kept. The emptied table keeps its
columns' types: number keys typed `decimal(38, s)` stay so (`migrator.target.delta_number_keys`), and
a key of the new generation that does not fit is refused by name as any later append's is.
"""

from __future__ import annotations

from deltalake import Transaction
from deltalake.exceptions import DeltaError

from migrator.errors import MigratorError
from migrator.target.delta import DeltaLocation, empty_with
from migrator.target.delta_rows import DeltaLayout


def restart_app_id(replication: str) -> str:
    """The application transaction the emptying commits carry: its version counts the restarts."""
    return f"{replication}-restart"


def restarts_of(location: DeltaLocation, replication: str) -> int:
    """How often replication `replication` (its appName) was restarted into the table; 0 when never."""
    return location.open().transaction_version(restart_app_id(replication)) or 0


def generation_id(base: str, restarts: int) -> str:
    """A copy id or an app id for the table's current generation: the plain one until the first restart."""
    return base if restarts == 0 else f"{base}-restart-{restarts}"


def empty_for_restart(location: DeltaLocation, layout: DeltaLayout, replication: str) -> int:
    """Remove every row of the table as one commit that starts the next generation; returns its number."""
    table = location.open()
    restart = (table.transaction_version(restart_app_id(replication)) or 0) + 1
    try:
        empty_with(table, layout, Transaction(restart_app_id(replication), restart))
    except (DeltaError, OSError) as exc:
        raise MigratorError(
            f"emptying the Delta table {location.uri} to restart failed ({type(exc).__name__}: {str(exc)[:300]}); "
            "nothing else was changed: run the job again, it restarts again"
        ) from None
    return restart

