"""Installing kirolearn into the agents: the engine, its file edits, the scheduler, each agent's targets."""
