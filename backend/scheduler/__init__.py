"""The scheduler of trigger.schedule nodes (issue 7): cron parsing, jobs, leader lease."""
