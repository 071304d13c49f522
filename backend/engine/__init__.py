"""The graph engine: expressions, execution of workflow graphs."""
