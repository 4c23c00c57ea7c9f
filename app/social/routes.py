"""HTTP surface of social links and social data."""

from __future__ import annotations

from flask import Response, make_response, redirect, request, url_for
from flask_smorest import Blueprint

from app.http import accepted_job, id_parameter, path_id, problem_doc
from app.idempotency.service import idempotent
from app.jobs.models import Job
from app.jobs.schemas import JobEnvelope
from app.social import service
from app.social.schemas import LinkIn, LinkStartedOut, SocialDataOut, SocialLinksEnvelope
from app.tenancy.auth import api_token_required, current_caller

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
    (streaming), both OAuth 2.0. After proving the account the user lands on `return_to`. The link
    is bound to the user's browser: it is finished only in a browser signed in to the tree's hosted
    sign-in as this user; any other browser gets a page saying nothing was linked.
    """
    return service.start_link(current_caller(), path_id(user_id, "user_id"), platform, args["return_to"])


@blp.route("/social/<string:platform>/callback", methods=["GET"])
@blp.response(
    303, headers={"Location": {"description": "The hosted page that finishes the link.", "schema": {"type": "string"}}}
)
def link_callback(platform: str):
    """Where the platform sends the user back (register it at the platforms): on, with the same
    query, to the hosted page that finishes the link, under the path of the browser's sign-in
    cookie (`/v1/openidc/social/{platform}/link`): only the browser signed in as the user links."""
    query = request.environ.get("QUERY_STRING", "")
    return redirect(url_for("oidc_pages.finish_social_link", platform=platform) + (f"?{query}" if query else ""), 303)


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
@blp.response(
    200,
    SocialDataOut,
    headers={"Age": {"description": "Seconds since the oldest member was fetched.", "schema": {"type": "integer"}}},
)
@blp.alt_response(
    202,
    schema=JobEnvelope,
    description="First fetch still running: poll the job, then ask again.",
    headers={"Location": {"description": "The job to poll.", "schema": {"type": "string"}}},
    success=True,
)
@problem_doc(404, 422)
def social_data(user_id: str):
    """The user's social data (spec 2.5) from the latest fetch of each linked platform.

    Data older than `SOCIAL_DATA_MAX_AGE` is returned at once (see `Age`) while one refresh runs
    in the background. With links but nothing fetched yet, waits up to `SOCIAL_DATA_WAIT` seconds,
    then answers 202 with the fetch job.
    """
    answer = service.social_data_or_first_fetch(current_caller(), path_id(user_id, "user_id"))
    if isinstance(answer, Job):
        return _accepted_response(answer)
    return answer.data, 200, _age_header(answer.age_seconds)


def _accepted_response(job: Job) -> Response:
    # This view's response schema is the 200 data; the 202 job envelope is serialised here.
    body, status, headers = accepted_job(job)
    return make_response(JobEnvelope().dump(body), status, headers)


def _age_header(age_seconds: int | None) -> dict[str, str]:
    return {} if age_seconds is None else {"Age": str(age_seconds)}
