"""The backend seam (SPEC section 3): the switch between ``ctxengine._core`` (Rust) and
``ctxengine.reference`` (pure Python), and the Python faces of the hot functions over it:
canonical JSON and payload hashes, the token estimator, the history cut and tool-pair
check, the budget policy and allocator.
"""
