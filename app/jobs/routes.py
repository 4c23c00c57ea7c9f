"""HTTP surface of jobs: status reads and the pipeline canary."""

from __future__ import annotations

from flask_smorest import Blueprint

from app.http import BARE_LOCATION_HEADER, accepted_job, job_id_or_404, problem_doc
from app.idempotency.service import idempotent
from app.jobs import service
from app.jobs.schemas import CanaryIn, JobEnvelope
from app.tenancy.auth import api_token_required, current_caller
from app.tenancy.service import subtree_client_ids

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
@blp.arguments(CanaryIn)
@blp.response(202, JobEnvelope, headers=BARE_LOCATION_HEADER)
@problem_doc(400, 413, 415, 422)
def start_canary(args: dict):
    """Start a canary job that proves outbox, broker, worker and database work end to end."""
    return accepted_job(service.start_canary(current_caller().client_id, args["delay_ms"]))
