"""Lance tables in DataFusion's Python bindings, with datafusion-lance's SQL.

``LanceTable`` and ``LanceCatalog`` register in a ``datafusion.SessionContext``
like any table or catalog (``ctx.register_table``,
``ctx.register_catalog_provider``): queries and ``INSERT INTO`` run through
DataFusion's own ``ctx.sql``. ``register(ctx)`` adds this crate's functions
(vector, full-text and hybrid search, metadata and maintenance functions,
``l2_distance``) and an engine that runs every statement of this crate —
MERGE INTO, time travel, DELETE / UPDATE, index DDL, CREATE TABLE in a Lance
catalog — through ``sql(ctx, text)``, over the Lance tables and catalogs
registered on ``ctx`` after ``register(ctx)``.

The package is built against ``datafusion==54.1.0``: the FFI between the two
must match exactly.
"""

from __future__ import annotations

from typing import Any

import datafusion

from ._native import Engine as _Engine
from ._native import LanceCatalog, LanceError, LanceResult, LanceTable

__all__ = ["LanceCatalog", "LanceError", "LanceResult", "LanceTable", "register", "sql"]

_ENGINE = "_datafusion_lance_engine"


def register(ctx: datafusion.SessionContext) -> None:
    """Adds this crate's functions to ``ctx`` and the engine ``sql`` uses.

    From then on, Lance tables and catalogs registered on ``ctx`` are also
    known to ``sql(ctx, ...)``. Registering twice changes nothing.
    """
    _engine(ctx)


def sql(ctx: datafusion.SessionContext, text: str) -> LanceResult:
    """Runs one statement through this crate's front door.

    The statement has run up to its first batch of rows when this returns (a
    statement that changes a table has committed); the rows stream through
    the Arrow C stream interface: ``pyarrow.table(result)``,
    ``pyarrow.RecordBatchReader.from_stream(result)``, ``duckdb`` or
    ``polars`` read them without a copy. Errors raise ``LanceError``; Ctrl-C
    cancels a running statement.
    """
    return _engine(ctx).sql(text)


def _engine(ctx: datafusion.SessionContext) -> Any:
    engine = getattr(ctx, _ENGINE, None)
    if engine is not None:
        return engine
    engine = _Engine()
    for function in engine.table_functions():
        ctx.register_udtf(datafusion.TableFunction(function.name, function, ctx))
    for function in engine.scalar_functions():
        ctx.register_udf(datafusion.udf(function))
    _follow_registrations(ctx, engine)
    setattr(ctx, _ENGINE, engine)
    return engine


def _follow_registrations(ctx: datafusion.SessionContext, engine: Any) -> None:
    """Makes ``ctx``'s registrations of Lance tables and catalogs reach ``engine``."""
    register_table = ctx.register_table
    deregister_table = ctx.deregister_table
    register_catalog = ctx.register_catalog_provider

    def register_table_too(name: str, table: Any) -> None:
        if isinstance(table, LanceTable):
            engine.register_table(name, table)
        register_table(name, table)

    def deregister_table_too(name: str) -> None:
        deregister_table(name)
        engine.deregister_table(name)

    def register_catalog_too(name: str, provider: Any) -> None:
        if isinstance(provider, LanceCatalog):
            engine.register_catalog(name, provider)
        register_catalog(name, provider)

    ctx.register_table = register_table_too  # type: ignore[method-assign]
    ctx.deregister_table = deregister_table_too  # type: ignore[method-assign]
    ctx.register_catalog_provider = register_catalog_too  # type: ignore[method-assign]
