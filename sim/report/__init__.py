"""Reports: metrics over a Trace, tables, JSON, Perfetto export."""
