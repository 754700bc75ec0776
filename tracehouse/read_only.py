"""The one rule of what a reader may run: SELECT and EXPLAIN only, judged by DuckDB's own
parser (``tracehouse query``, ``tracehouse.connect(...).sql``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

READ_ONLY_STATEMENTS = frozenset({"SELECT", "EXPLAIN"})


class ReadOnlyViolation(PermissionError):
    """A statement that would change something, refused before it runs."""


def check_read_only(connection: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Refuse anything but SELECT/EXPLAIN, judged by DuckDB's own parser (not by string tests).

    ``EXPLAIN ANALYZE`` runs the statement it explains, so it is allowed only around a SELECT:
    ``EXPLAIN ANALYZE COPY ... TO '<generation>/runs.parquet'`` would otherwise overwrite the
    warehouse (the generation folder is the one place the connection may touch files).
    """
    statements = connection.extract_statements(sql)
    if not statements:
        raise ReadOnlyViolation("refused: the SQL is empty; give one SELECT statement")
    for statement in statements:
        kind = statement.type.name
        if kind not in READ_ONLY_STATEMENTS:
            raise ReadOnlyViolation(
                f"refused: {_first_keyword(statement.query, kind)} statements are not allowed; "
                "`tracehouse query` is read-only (only SELECT and EXPLAIN run). Rebuild the "
                "warehouse with `tracehouse build`."
            )
        if kind == "EXPLAIN":
            _check_explain(connection, statement.query)
    if len(statements) > 1:
        raise ReadOnlyViolation(
            f"refused: {len(statements)} statements given; `tracehouse query` runs exactly one "
            "statement at a time (only the last result would show)"
        )


def _words(sql: str) -> list[tuple[int, str]]:
    """(position, text) of each token of ``sql`` except comments, by DuckDB's tokenizer."""
    import duckdb

    tokens = duckdb.tokenize(sql)
    words = []
    for i, (position, kind) in enumerate(tokens):
        if kind == duckdb.token_type.comment:
            continue
        end = tokens[i + 1][0] if i + 1 < len(tokens) else len(sql)
        words.append((position, sql[position:end].strip()))
    return words


def _first_keyword(sql: str, fallback: str) -> str:
    # DuckDB files INSTALL under LOAD and RESET under SET; name what the user typed.
    words = _words(sql)
    word = words[0][1].upper() if words else ""
    return word if word.isalpha() else fallback


def _check_explain(connection: duckdb.DuckDBPyConnection, sql: str) -> None:
    words = _words(sql)
    analyze = False
    i = 1  # words[0] is EXPLAIN
    while i < len(words):
        word = words[i][1].upper().strip('"')
        if word in ("ANALYZE", "ANALYSE"):
            analyze = True
            i += 1
            continue
        if word != "(":
            break
        depth, j, group = 0, i, []
        for j in range(i, len(words)):
            token = words[j][1]
            depth += token.count("(") - token.count(")")
            group.append(token.upper().strip('"'))
            if depth <= 0:
                break
        if j + 1 >= len(words):  # the parenthesis is the explained statement itself
            break
        analyze = analyze or "ANALYZE" in group or "ANALYSE" in group
        i = j + 1
    if not analyze:
        return  # plain EXPLAIN only plans the statement, it never runs it
    inner = sql[words[i][0] :] if i < len(words) else ""
    try:
        kinds = [s.type.name for s in connection.extract_statements(inner)] if inner else []
    except Exception:  # anything DuckDB cannot parse here is refused
        kinds = []
    if not kinds or any(kind != "SELECT" for kind in kinds):
        raise ReadOnlyViolation(
            "refused: EXPLAIN ANALYZE runs the statement it explains, and only "
            "EXPLAIN ANALYZE SELECT is allowed; `tracehouse query` is read-only."
        )
