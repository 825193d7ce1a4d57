"""The interactive interpretability panel: export of an analysis folder as a static web app
(``export``), its data schema (``schema``) and a local server (``server``)."""
