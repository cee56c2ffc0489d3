"""Task evals: case files run as real tasks, checked against their events, reported with intervals."""
