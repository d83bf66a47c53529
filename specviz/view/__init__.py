"""The view layer: HTML and CSS built from the domain's objects, no Streamlit. Token text is untrusted: every
piece is escaped."""
