"""CommCoach: a coaching chat for communication skills, with a persona per instance and session summaries."""
