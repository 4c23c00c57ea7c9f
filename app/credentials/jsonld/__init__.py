"""JSON-LD processing: the offline document loader and RDFC-1.0 canonicalization."""
