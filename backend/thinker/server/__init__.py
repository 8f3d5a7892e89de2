"""The platform server: FastAPI routes, Socket.IO, auth, the model pool and the dashboard."""
