"""HTTP surface of jobs: status reads and the pipeline canary."""

from __future__ import annotations

from flask_smorest import Blueprint
from marshmallow import ValidationError

from app.http import (
    BARE_LOCATION_HEADER,
    accepted_job,
    accepted_job_location,
    job_id_or_404,
    parse_json_body,
    problem_doc,
)
from app.idempotency.service import HEADER as IDEMPOTENCY_KEY
from app.idempotency.service import idempotent
from app.jobs import service
from app.jobs.schemas import CanaryIn, JobEnvelope
from app.tenancy.auth import api_token_required, current_caller, unstamped_caller
from app.tenancy.service import subtree_client_ids
from app.web.hot import HotAnswer, HotRequest, hot, json_answer

blp = Blueprint("jobs", __name__, url_prefix="/v1/jobs", description="Results of slow work")


@blp.route("/<string:job_id>", methods=["GET"])
@api_token_required
@blp.response(200, JobEnvelope)
@problem_doc(404)
def get_job(job_id: str):
    """Read a job started by your client tree."""
    caller = current_caller()
    return {"data": service.require_job_for_client(job_id_or_404(job_id), lambda: subtree_client_ids(caller.path))}


@blp.route("/canary", methods=["POST"])
@api_token_required
@idempotent
@blp.arguments(CanaryIn, required=False)
@blp.response(202, JobEnvelope, headers=BARE_LOCATION_HEADER)
@problem_doc(400, 413, 415, 422)
def start_canary(args: dict):
    """Start a canary job that proves outbox, broker, worker and database work end to end."""
    return accepted_job(service.start_canary(current_caller().client_id, args["delay_ms"]))


_CANARY_IN, _JOB_ENVELOPE = CanaryIn(), JobEnvelope()
_IDEMPOTENCY_KEY = "HTTP_" + IDEMPOTENCY_KEY.upper().replace("-", "_")


@hot.route("POST", r"/v1/jobs/canary", view="jobs.start_canary", media_type="application/json", cookies=False)
def start_canary_at_once(request: HotRequest) -> HotAnswer | None:
    """The canary's plain start: a valid token whose last use needs no stamp, no Idempotency-Key,
    a body the view's `CanaryIn` takes. The view's token statement and `service.start_canary` write
    the job in the unit of work (its own statement); the job is published once that has committed,
    and answered with the view's schema and `Location`."""
    token = request.header("HTTP_X_API_TOKEN")
    if not token or _IDEMPOTENCY_KEY in request.environ:
        return request.hand_off("no token, or an Idempotency-Key the view keeps")
    try:
        args = _CANARY_IN.load(parse_json_body(request.body or b""))
    except (ValueError, ValidationError):  # malformed JSON (a ValueError) or refused by the schema
        return request.hand_off("a body the view refuses")
    with request.app.app_context():
        with request.unit_of_work() as connection:
            caller = unstamped_caller(token, connection)
            if caller is None:
                return request.hand_off("token unknown, revoked, expired or its use to stamp")
            job = service.start_canary(caller.client_id, args["delay_ms"], connection)
        location = accepted_job_location(request.app, request.environ, job.id)
        answer = json_answer(request.app, 202, _JOB_ENVELOPE.dump({"data": job}), {"Location": location})
        service.publish_committed_jobs([job])
        return answer
