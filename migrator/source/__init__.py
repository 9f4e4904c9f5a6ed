"""Where items come from: a parallel Scan of a live table."""
