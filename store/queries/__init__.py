"""The reads of the projection tables, next to the store that writes them: one module per table family."""
