"""tracehouse: a warehouse for FlashInfer-Bench kernel benchmark results."""

# Bumped whenever parsing or normalisation changes, so cached staging parts are rebuilt.
IMPORTER_VERSION = "tracehouse-importer/2"
