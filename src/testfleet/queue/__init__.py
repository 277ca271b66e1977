"""Queue mode (#40): a lane's files pulled by any number of runners from one PostgreSQL
queue under leases, instead of a fixed partition per shard.

``policy`` holds the decisions as pure functions (claim order, what an expired lease or a
failure leads to); ``store.queue`` the SQL; ``worker`` one runner's loop around the
runner's one-file execution; ``status`` what ``testfleet queue status`` and reconcile read.
"""
