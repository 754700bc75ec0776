"""Publishing a finished build beyond its local folder (Apache Iceberg tables in a catalog)."""
