"""The interactive interpretability panel: export of an analysis folder as a static web app
(``export``), the folder it writes (``bundle``, field by field in ``panel.schema.json``) and a
local server (``server``)."""
