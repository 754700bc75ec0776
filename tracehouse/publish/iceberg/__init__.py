"""The published form of a warehouse: one Apache Iceberg table per tracehouse table, in a
catalog, on object storage (or in ``<folder>/iceberg`` beside a local warehouse).

Writing. A build works in a local folder exactly as a folder warehouse does (staging parts,
generations, invariants, publish guards). Once its generation is complete, every table is
committed to Iceberg, one commit per table:

- the build's rows of the table are cut into parts (``Part``): one per file the generation
  stores for the build's source in a per-source table (a group of trace files, a history
  delta), with the ``source`` and ``snapshot_id`` columns its view adds; ``source_snapshots``'
  rows of that source; the generation's own file for the rest. Each part is named by a digest
  of its content, and its data files by that name.
- one snapshot (an ``overwrite`` of files, in one transaction with any schema, doc or sort
  order change) removes the files of parts the table no longer wants and adds those of the
  parts it does not hold yet, written by pyiceberg's own writer (field IDs in every file); a
  table that holds exactly its parts is not committed. Tables with a ``source`` column are
  partitioned by it and a build touches only its own source's partition, so builds of
  different sources touch disjoint partitions; tables without one are replaced whole. Every
  snapshot therefore holds the whole table (no empty snapshot between a delete and an append).
- A commit that loses the race against another writer (``CommitFailedException``) reloads the
  table and tries again, so two builds from two machines both land.
- Tables computed across every source (``run_rankings``) are not published as part of a
  publication: a build sees only the sources of its own staging folder, so readers compute them
  over the union. After its publication row, a build commits them and the main marts
  (``MARTS``) for other engines, read from the latest publication as a reader reads it.

Every Iceberg snapshot carries the tracehouse snapshot id, source and revision in its summary
properties. After the last table, one row is appended to ``tracehouse_publications``: the
tracehouse snapshot, its revision, and the Iceberg snapshot each table got. That row is the
commit point of the whole build: readers only ever look at snapshots a publication names, so a
build killed half way through its tables changes nothing they see.

Reading. A reader picks the publication (the latest, or the latest of a revision or snapshot id
for time travel); for each table it takes, among the snapshots that publication and the earlier
ones name, the one with the highest sequence number (snapshots of a table form one line, so that
one holds every earlier published commit, whichever source made it). The data files of those
snapshots are downloaded as they are into a local replica folder laid out as a generation of
several sources (``sources.json`` from each source's latest ``source_snapshots`` row, each
source's files in its own folder; ``protocols`` and ``baseline_map`` written from their rows as
a build writes them, the bytes an export copies), ``run_rankings`` is ranked there over every source with the
build's own SQL, and the usual DuckDB views are created over it; so every read command works
unchanged, and an unchanged warehouse is not downloaded twice.
"""
