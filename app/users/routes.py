"""HTTP surface of users."""

from __future__ import annotations

from flask import url_for
from flask_smorest import Blueprint

from app.http import LOCATION_HEADER, id_parameter, path_id, problem_doc
from app.idempotency.service import idempotent
from app.tenancy.auth import api_token_required, current_caller
from app.users import service
from app.users.schemas import UserCreateIn, UserEnvelope

blp = Blueprint("users", __name__, url_prefix="/v1/user", description="Users and their profiles")


@blp.route("/create", methods=["POST"])
@api_token_required(subclient=True)
@idempotent
@blp.arguments(UserCreateIn)
@blp.response(201, UserEnvelope, headers=LOCATION_HEADER)
@problem_doc(400, 404, 409, 413, 415, 422)
def create_user(args: dict):
    """Create a user from a profile, with a new DID, in the acting node of the caller's tree.

    `email_address` is required and unique within the client tree (409 otherwise).
    """
    user = service.create_user(current_caller(), args["profile"])
    return {"data": user}, 201, {"Location": url_for("users.get_user", user_id=user.id)}


@blp.route("/<user_id>", methods=["GET"], parameters=[id_parameter("user_id", "A user of the acting subtree.")])
@api_token_required(subclient=True)
@blp.response(200, UserEnvelope)
@problem_doc(404, 422)
def get_user(user_id: str):
    """Read a user created anywhere in the acting node's subtree."""
    return {"data": service.require_user_visible(path_id(user_id, "user_id"), current_caller().acting_path)}
