"""Drop-in replacements for other libraries' context functions (``langchain``)."""
