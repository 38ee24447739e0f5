"""DuckDB + DuckLake: the engine (SQL), the window pin, the cursors, the estimate, the runner."""
