"""HTTP pieces with no dependency on the rest of the application (importable from `app.errors`)."""
