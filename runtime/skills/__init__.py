"""Agent Skills: parsing SKILL.md, the catalog, activation in a task, review, the skill tools, the watcher."""
