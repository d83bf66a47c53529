"""specviz: the router. Pages live in pages/; logic lives in the specviz package."""

import streamlit as st

st.set_page_config(page_title="specviz", page_icon="🔭", layout="wide")
st.navigation([
    st.Page("pages/playground.py", title="Playground", icon="🧪", default=True),
]).run()
