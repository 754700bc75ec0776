"""The report writes its charts as plain figure JSON, without Plotly's Python validation: each
figure a definition page embeds must be one Plotly accepts as it is and would write the same
(its validated form equal to what the page holds), so that skipping validation changes nothing
the browser is given."""

from __future__ import annotations

import json
import re
from typing import Any

import plotly.graph_objects as go
import pytest

from tracehouse.serve.report_definition import (
    COVERAGE_MAP_MAX_WORKLOADS,
    LEADERBOARD_COLUMNS,
    definition_page,
)


def _figures(page: str) -> dict[str, dict[str, Any]]:
    """Every ``Plotly.newPlot(id, data, layout, config)`` of a page, by its div's id."""
    decoder = json.JSONDecoder()
    figures = {}
    for match in re.finditer(r"Plotly\.newPlot\(\s*", page):
        values, at = [], match.end()
        for _ in range(3):
            value, at = decoder.raw_decode(page, at)
            values.append(value)
            at = re.compile(r"\s*,\s*").match(page, at).end()  # type: ignore[union-attr]
        div_id, data, layout = values
        figures[div_id] = {"data": data, "layout": layout}
    return figures


def _page(workloads: int) -> str:
    solutions = ["baseline", "fast <b>one</b>", "slow & steady"]
    board = [
        {
            **{column: None for column, _ in LEADERBOARD_COLUMNS},
            "hardware": "H100",
            "leaderboard_rank": rank,
            "solution": solution,
            "baseline_solution": "baseline",
            "baseline_choice": "declared",
        }
        for rank, solution in enumerate(solutions, start=1)
    ]
    keys = [f"w{i:03d}" for i in range(workloads)]
    curves = [
        {"hardware": "H100", "solution": s, "p": [0.0, 0.5, 1.0], "fast_p": [1.0, 0.75, None]}
        for s in solutions
    ]
    speedups = [
        {"hardware": "H100", "solution": s, "workload_key": keys, "speedup": [1.5] * workloads}
        for s in solutions
    ]
    statuses = ["PASSED", "INCORRECT_NUMERICAL", "not run"]
    cells = [
        {
            "hardware": "H100",
            "solution": s,
            "workload_key": key,
            "axes_json": json.dumps({"M": i}),
            "status": statuses[(i + n) % len(statuses)],
            # as DEFINITION_COVERAGE_SQL gives them: one grid cell a row, and the slice's size
            "cells": 1,
            "n_workloads": len(keys),
        }
        for n, s in enumerate(solutions)
        for i, key in enumerate(keys)
    ]
    definition = {"definition": "gemm", "op_type": "gemm", "solutions": 3, "runs": 9}
    return definition_page(definition, board, curves, speedups, cells, [], {})


@pytest.mark.parametrize("workloads", [4, COVERAGE_MAP_MAX_WORKLOADS + 1])
def test_each_figure_is_the_one_plotly_would_write(workloads: int) -> None:
    figures = _figures(_page(workloads))
    assert sorted(figures) == ["coverage-0", "fast-p-0", "speedups-0"]
    kinds = {div_id: [t["type"] for t in figure["data"]] for div_id, figure in figures.items()}
    coverage = ["bar"] * 3 if workloads > COVERAGE_MAP_MAX_WORKLOADS else ["heatmap"]
    assert kinds == {"fast-p-0": ["scatter"] * 3, "speedups-0": ["box"] * 3, "coverage-0": coverage}
    for figure in figures.values():
        assert go.Figure(figure).to_dict() == figure


def test_a_solution_without_a_colour_is_drawn_in_plotlys_own() -> None:
    """A solution the leaderboard does not list has no colour of the page: its traces set
    none, and no empty ``marker`` either, as Plotly writes a trace given ``color=None``."""
    definition = {"definition": "gemm", "op_type": "gemm", "solutions": 1, "runs": 1}
    board = [
        {
            **{column: None for column, _ in LEADERBOARD_COLUMNS},
            "hardware": "H100",
            "solution": "listed",
            "baseline_solution": None,
            "baseline_choice": None,
        }
    ]
    curve = {"hardware": "H100", "solution": "unlisted", "p": [1.0], "fast_p": [1.0]}
    speedup = {"hardware": "H100", "solution": "unlisted", "workload_key": ["w"], "speedup": [2.0]}
    page = definition_page(definition, board, [curve], [speedup], [], [], {})
    figures = _figures(page)
    (fast_p,) = figures["fast-p-0"]["data"]
    (box,) = figures["speedups-0"]["data"]
    assert fast_p["line"] == {"shape": "hv"}
    assert "marker" not in box
    for figure in figures.values():
        assert go.Figure(figure).to_dict() == figure
