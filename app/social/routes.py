"""HTTP surface of social links and social data."""

from __future__ import annotations

from flask import jsonify, redirect, request, url_for
from flask_smorest import Blueprint

from app.db import commit
from app.http import problem_doc
from app.idempotency.service import idempotent
from app.jobs.schemas import JobEnvelope
from app.social import service
from app.social.schemas import LinkIn, LinkStartedOut, SocialDataOut, SocialLinksEnvelope
from app.tenancy.auth import api_token_required, current_caller
from app.tenancy.routes import id_parameter, path_id

blp = Blueprint("social", __name__, url_prefix="/v1", description="Linked platform accounts and their data")

USER_ID = [id_parameter("user_id", "A user of the acting subtree.")]


@blp.route("/user/<user_id>/social/<string:platform>/link", methods=["POST"], parameters=USER_ID)
@api_token_required(subclient=True)
@idempotent
@blp.arguments(LinkIn)
@blp.response(200, LinkStartedOut)
@problem_doc(404, 415, 422, 503)
def start_link(args: dict, user_id: str, platform: str):
    """Start linking a platform account: send the user to `authorization_url` before `expires_at`.

    Platforms: `platform_a` (game store, OpenID 2.0), `platform_b` (chat) and `platform_c`
    (streaming), both OAuth 2.0. After proving the account the user lands on `return_to`.
    """
    return service.start_link(current_caller(), path_id(user_id, "user_id"), platform, args["return_to"])


@blp.route("/social/<string:platform>/callback", methods=["GET"])
@blp.response(302)
@problem_doc(400, 404)
def link_callback(platform: str):
    """Where the platform sends the user back; stores the link and redirects to `return_to`."""
    return redirect(service.complete_link(platform, request.args.to_dict()), code=302)


@blp.route("/user/<user_id>/social/<string:platform>", methods=["DELETE"], parameters=USER_ID)
@api_token_required(subclient=True)
@blp.response(204)
@problem_doc(404, 422)
def unlink(user_id: str, platform: str):
    """Unlink a platform account and delete its data."""
    service.unlink(current_caller(), path_id(user_id, "user_id"), platform)


@blp.route("/user/<user_id>/social", methods=["GET"], parameters=USER_ID)
@api_token_required(subclient=True)
@blp.response(200, SocialLinksEnvelope)
@problem_doc(404, 422)
def list_links(user_id: str):
    """The user's linked accounts with status, last fetch and last error."""
    return {"data": service.list_links(current_caller(), path_id(user_id, "user_id"))}


@blp.route("/user/<user_id>/social_data", methods=["GET"], parameters=USER_ID)
@api_token_required(subclient=True)
@blp.response(200, SocialDataOut, headers={"Age": {"description": "Seconds since the oldest member was fetched.",
                                                    "schema": {"type": "integer"}}})
@blp.alt_response(202, schema=JobEnvelope, description="First fetch still running: poll the job, then ask again.")
@problem_doc(404, 422)
def social_data(user_id: str):
    """The user's social data (spec 2.5) from the latest fetch of each linked platform.

    Data older than `SOCIAL_DATA_MAX_AGE` is returned at once (see `Age`) while one refresh runs
    in the background. With links but nothing fetched yet, waits up to `SOCIAL_DATA_WAIT` seconds,
    then answers 202 with the fetch job.
    """
    caller = current_caller()
    user = path_id(user_id, "user_id")
    view = service.read_social_data(caller, user)
    if view.waiting:
        commit()  # publish the first fetch before waiting for it
        view = service.wait_for_social_data(caller, user, service.settings().data_wait)
    if view.waiting and view.pending:
        job = view.pending[0]
        response = jsonify(JobEnvelope().dump({"data": job}))
        response.status_code = 202
        response.headers["Location"] = url_for("jobs.get_job", job_id=job.id)
        return response
    headers = {"Age": str(view.age_seconds)} if view.age_seconds is not None else {}
    return view.data or {}, 200, headers
