"""Traces derived from the log: a task's spans (span), sent to an OTLP collector or written as JSON lines
(export), live as events are appended (follower) or for any past task (`agentd trace export`)."""
