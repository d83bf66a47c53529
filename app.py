"""specviz: the router. Pages live in pages/; logic lives in the specviz package."""

import streamlit as st

st.set_page_config(page_title="specviz", page_icon="🔭", layout="wide")
st.navigation([
    st.Page("pages/playground.py", title="Playground", icon="🧪", default=True),
    st.Page("pages/methods.py", title="Methods", icon="🧭"),
    st.Page("pages/throughput.py", title="Throughput", icon="📈"),
    st.Page("pages/tuning.py", title="Tuning", icon="🎛️"),
]).run()
