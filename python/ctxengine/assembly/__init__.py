"""Assembly (SPEC section 5): the region table, rendering, trust envelopes, the turn split,
the ``ModelRequest`` and the ``ContextBuilder`` that puts them together under the budget.
"""
