"""Levels as files: level-state files, playing them (``--levels-from``), and the ``proclab level`` commands.

A level is a Procgen game state (:mod:`proclab.envs.state` reads and edits it); this package keeps
such states in files (:mod:`.file`), restarts a vector env's episodes from them (:mod:`.play`), shows and
edits them (:mod:`.show`, :mod:`.edit`), and gives them the ``proclab level`` commands (:mod:`.command`).
"""
