"""The harness around tasks: task and approval commands, schedules, background jobs, the timeline."""
