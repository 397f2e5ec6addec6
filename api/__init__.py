"""The HTTP API (design §12 "Interfaces"): a FastAPI app served by uvicorn
(``memoryctl serve``). ``api.app.create_app`` builds it; ``docs/api.md`` documents it."""
