"""Tasks of the OpenID provider: key rotation, housekeeping, SMTP delivery, back-channel logout."""

from __future__ import annotations

from functools import partial
from smtplib import SMTPException

from app.db import transaction
from app.extensions import celery
from app.jobs.runner import TransientError, job_task
from app.jobs.service import CallOutside
from app.oidc import authorize, backchannel, keys, mail
from app.oidc.settings import OidcSettings
from app.settings import current


@celery.task(name="oidc.rotate_keys", ignore_result=True)
def rotate_keys() -> list[str]:
    """Rotate the signing keys that are due, and drop retired keys no token needs any more."""
    with transaction():
        activated = keys.rotate_keys_if_due()
        keys.purge_retired_keys()
    return activated


@celery.task(name="oidc.purge_expired", ignore_result=True)
def purge_expired() -> int:
    """Delete expired codes, sign-in requests, sessions and deny-list entries."""
    with transaction():
        return authorize.purge_expired()


@job_task(mail.SEND_MAIL_TASK)
def send_mail(job):
    # The SMTP server is another host: it is called with no transaction open.
    return CallOutside(call=partial(_deliver, job.payload), record=lambda _job, result: result)


def _deliver(payload: dict) -> dict:
    try:
        return mail.deliver_sealed(payload)
    except (OSError, SMTPException) as exc:
        raise TransientError(f"SMTP delivery failed: {exc.__class__.__name__}") from exc


@job_task(backchannel.LOGOUT_TASK, transient=(backchannel.BackchannelLogoutUnavailable,))
def backchannel_logout(job):
    return backchannel.deliver_logout(job.payload)


def beat_schedule(app) -> dict:
    check = current(OidcSettings, app).key_rotation_check
    return {
        "oidc-rotate-keys": {"task": "oidc.rotate_keys", "schedule": float(check)},
        "oidc-purge-expired": {"task": "oidc.purge_expired", "schedule": 900.0},
    }
