"""The agent loop and what each decision is assembled from: the task view, request, proposals, profiles."""
