"""firstpass: send torch.profiler traces to a firstpass server and read its analyses.

    import firstpass, torch
    with torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),
                                on_trace_ready=firstpass.trace_handler()) as prof:
        for batch in loader:
            step(batch)
            prof.step()

    c = firstpass.Client("http://127.0.0.1:8080")
    c.operators(c.sessions(limit=1)[0]["id"])

Standard library only; pandas is used when as_frame=True asks for it. docs/python.md."""
__version__ = "0.1.0"

from .client import Client  # noqa: E402
from .errors import FirstpassError  # noqa: E402
from .handler import TraceHandler, trace_handler  # noqa: E402

__all__ = ["Client", "FirstpassError", "TraceHandler", "trace_handler", "__version__"]
