"""The single Dagster code location, ``tracehouse``: the dg project's target
(``[tool.dg.project]`` in pyproject.toml; ``dg dev``, ``dg check defs``) and the module
workspace.yaml loads for ``dagster dev``.

Every asset, check, job and sensor is found where it is declared: the ``pipelines.defs``
folder is autoloaded, as ``dg scaffold defs`` expects (a module it writes there is part of the
location with no edit here). What belongs to the location as a whole, not to one module, is
assembled here: the resource every asset uses and the default executor."""

import warnings
from pathlib import Path

import dagster as dg

# The beta APIs this location uses on purpose (the observable, partitioned source asset and
# a selection that includes it): known here, and a warning before every command's output
# would tell its user nothing. Any other beta or deprecation warning still shows.
for _beta in (
    r"Function `observable_source_asset` is currently in beta",
    r"Parameter `include_sources` of function `AssetSelection.all` is currently in beta",
    r"Class `DataVersionsByPartition` is currently in beta",
):
    warnings.filterwarnings("ignore", message=_beta, category=dg.BetaWarning)

import pipelines.defs  # noqa: E402
from pipelines.defs.resources import WarehouseResource  # noqa: E402


def _defs_folder() -> dg.Definitions:
    """Everything declared in ``pipelines/defs``. The tree is rooted at the package itself, not
    found by looking for pyproject.toml upwards: installed from a wheel, the nearest
    pyproject.toml above site-packages would be some other project's."""
    tree = dg.ComponentTree.from_module(
        defs_module=pipelines.defs, project_root=Path(pipelines.defs.__file__).parents[2]
    )
    with warnings.catch_warnings():
        # The module loader it calls is "preview"; dg.load_from_defs_folder silences the same.
        warnings.filterwarnings("ignore", category=dg.PreviewWarning)
        return tree.build_defs()


defs = dg.Definitions.merge(
    _defs_folder(),
    dg.Definitions(
        # Every setting comes from TRACEHOUSE_* (tracehouse.settings), as for the CLI.
        resources={"warehouse": WarehouseResource()},
        # One build step that parallelizes itself, then sub-second checks and views: a
        # process per step would cost more than it saves. The fanout jobs name their own
        # executors.
        executor=dg.in_process_executor,
    ),
)
