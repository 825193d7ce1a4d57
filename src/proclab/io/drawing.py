"""proclab's figures: made with matplotlib's object API, never with pyplot, so that drawing leaves the user's
matplotlib as it was.

A library that calls ``matplotlib.use`` or makes its figures with pyplot changes its user's global state:
the backend (after which a notebook's ``plt.show()`` shows nothing) and pyplot's list of open figures (each
to be closed by hand, or kept alive for ever). A :class:`Figure` made directly is neither: pyplot never hears
of it, ``savefig`` draws it on the canvas of the file's format, and it is freed like any object once nothing
refers to it. :func:`proclab.io.files.subplots` makes one (this module imports matplotlib, which is slow).

A figure pyplot does not know has no display of its own in Jupyter: IPython shows a matplotlib figure as
an image only once pyplot's inline backend has registered its formatter, which happens when pyplot makes
its first figure (or ``%matplotlib inline`` runs). :meth:`Figure._repr_png_` is that display, so a proclab
figure that is a cell's last value is shown whether or not the notebook ever used pyplot (where the inline
formatter is registered, it takes precedence, with the user's figure format).
"""

from __future__ import annotations

import io

import matplotlib.figure


class Figure(matplotlib.figure.Figure):
    """A matplotlib figure that shows itself in a notebook."""

    def _repr_png_(self) -> bytes:
        """The figure as PNG, cropped to what is drawn as Jupyter's inline backend crops it."""
        buffer = io.BytesIO()
        self.savefig(buffer, format="png", bbox_inches="tight")
        return buffer.getvalue()
