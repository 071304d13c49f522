"""Triggers that start published workflows from outside (issue 7, item 4; DESIGN §4, §6).

- ``webhooks``: ``POST /api/hooks/{workflowId}/{path}`` signed as Standard Webhooks;
- ``events``: ``POST /api/events {type, payload}`` fans out to the caller's mandate(s);
- ``forms``: a public form per workflow (``GET|POST /api/forms/{workflowId}``);
- ``launch``: what they share: finding the trigger node in the published version, back-pressure
  and starting the run durably as the workflow's creator, handing it to the run queue in the same transaction.

Framework-free: the REST routes live in backend/api/triggers.py.
"""
