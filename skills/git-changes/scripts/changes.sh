#!/bin/sh
# Recent changes in the current folder (the task's workspace): git status and log, or else the newest files.
set -u

if [ "$#" -ne 0 ]; then
    echo "changes.sh: error: takes no arguments; it reports on the folder it runs in" >&2
    exit 2
fi

if command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    branch=$(git symbolic-ref --short -q HEAD || echo "(detached)")
    echo "git repository, branch $branch"
    echo
    echo "status (git status --short):"
    status=$(git status --short)
    if [ -n "$status" ]; then
        printf '%s\n' "$status"
    else
        echo "clean: no uncommitted changes"
    fi
    echo
    echo "last 5 commits:"
    if git rev-parse -q --verify HEAD >/dev/null; then
        git log -5 --no-decorate --format='%h %ad %s' --date=short
    else
        echo "none yet"
    fi
else
    echo "not a git repository; the 10 most recently modified files, newest first:"
    # One ls sorts them all unless there are so many that find splits the list; then each batch is sorted.
    newest=$(find . -type d -name .git -prune -o -type f -exec ls -dt {} + 2>/dev/null | head -n 10)
    if [ -n "$newest" ]; then
        printf '%s\n' "$newest" | sed 's|^\./||'
    else
        echo "none: the folder has no files"
    fi
fi
