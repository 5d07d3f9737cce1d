"""The runtime port (SPEC sections 4 and 6-7): session history in the log, compaction,
checkpoint writes, working state and the ``ContextLoop`` that drives them between requests.
"""
