"""The suite. Each folder below is a package, so pytest imports a test module by its dotted path
(tests.runtime.agent.test_agent) and two folders may hold test modules of the same name."""
