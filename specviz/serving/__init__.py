"""Everything that talks to a vLLM server, named by role along the pipeline:

    local / attached   start a server (LocalServer) or attach to running ones (attach, attach_many)
    stream             stream completions, one chunk per engine step (stream_completion)
    tracer             the scheduler subclass inside vLLM that writes one record per engine step
    trace_reader       read those records as they are written, join them to the requests
    counters           vLLM's own spec-decode counters, to cross-check every run
    recording          record(): all of the above into a Run (runfile.Run)
    live, shared       one request generated live for the app; one engine shared by its sessions
    verify_client      one typed draft verified by the target: a single /v1/completions (verify_draft)

Every server kind implements server.Server. Import from the modules themselves: the tracer runs
inside vLLM's EngineCore and must not pull in the client side.
"""
