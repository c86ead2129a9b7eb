"""File formats: ArrayRecord, Parquet, TFRecord, and data sources in shared memory."""
