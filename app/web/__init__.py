"""The request pipeline's shared pieces: problem+json responses, the edge every response passes
(request id, security headers, metrics) and the hot-route layer in front of Flask's dispatch."""
