"""Publishing a finished build: the atomic switch between generations of the warehouse folder
(``generations``), and beyond it, Apache Iceberg tables in a catalog (``iceberg``)."""
