"""specviz: the router. Pages live in app_pages/; logic lives in the specviz package.

Not "pages/": Streamlit treats a folder of that name as its older automatic multipage app, and a
page opened by its URL in a fresh session would then run without this router.
"""

import streamlit as st

from specviz.viewer import VIEWER_CAPTION, viewer_mode

st.set_page_config(page_title="specviz", page_icon=":material/query_stats:", layout="wide")
page = st.navigation([
    st.Page("app_pages/playground.py", title="Playground", icon=":material/science:", default=True),
    st.Page("app_pages/methods.py", title="Methods", icon=":material/account_tree:"),
    st.Page("app_pages/throughput.py", title="Throughput", icon=":material/speed:"),
    st.Page("app_pages/tuning.py", title="Tuning", icon=":material/tune:"),
])
if viewer_mode():  # shared deployments: recorded runs and sweeps only (SPECVIZ_VIEWER=1)
    st.sidebar.caption(VIEWER_CAPTION)
page.run()
