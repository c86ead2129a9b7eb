"""File formats: ArrayRecord and Parquet."""
