"""Where items go: the target table's schema and the batch writer."""
