"""What long passes run on: sjsonl's own process pool (:mod:`~sjsonl.runtime.parallel`, which never runs the
user's script again), how a task travels to it (:mod:`~sjsonl.runtime.shipping`), and progress on stderr
(:mod:`~sjsonl.runtime.progress`). The lowest layer: it knows nothing of files, indexes or records.
"""
