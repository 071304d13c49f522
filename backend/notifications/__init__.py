"""Notifications (issue 7, item 5): a failed scheduled, webhook or event run tells the workflow's
owner, in the app (a Notification row, listed in the shell with its unread count) and by e-mail
when POWERON_SMTP_URL is set.

- :mod:`service`: the Notification rows (create for a failed run, list, count, mark read);
- :mod:`mailer`: the SMTP settings and sending with smtplib on a background thread;
- :mod:`notifier`: the subscriber of ``run.failed`` on the in-process event bus, started with
  the app (:func:`start_notifier`, from the Reflex lifespan).
"""
