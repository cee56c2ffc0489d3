"""The long-running process: its parts wired together, the dispatch of tasks, the instance lock."""
