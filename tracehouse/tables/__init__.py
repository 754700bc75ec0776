"""The declarations of every table and view (part of the core): ``declare`` says how one is
declared, the other modules declare them grouped by what they hold; ``tracehouse.schemas``
gathers them and derives every list of tables."""
