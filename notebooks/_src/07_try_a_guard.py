# %% [markdown]
# # 07 · Try a guard on your own text
#
# Type anything into the box and press **Stream it**: the text is cut into small chunks, as a
# model streams them, and sent through a `PIIDetector` with `ops.apply`. The left pane shows what
# the model sent, the right one what a client receives — watch an e-mail address or a card number
# being held back while it is still incomplete, then released masked. Nothing leaves your
# machine: there is no model here, only the guard.
#
# (Running headless, as the test suite does, the last cells type a sample for you.)

# %%
import asyncio
import html

import ipywidgets as widgets
from IPython.display import HTML, display

from streamkit import display as skdisplay
from streamkit import ops
from streamkit.chunks import TextDelta
from streamkit_operators import PIIDetector

SAMPLE = ("Hi! I'm Ada, write to ada.lovelace@example.com or call +44 20 7946 0958. "
          "My card is 4111 1111 1111 1111.")


class WidgetHandle:
    """Renders a live view into an ``ipywidgets.HTML`` (what ``skdisplay.live`` calls
    ``handle.update`` on), so the view lives inside the control instead of a cell output."""

    def __init__(self, target: widgets.HTML) -> None:
        self.target = target

    def update(self, obj) -> None:
        self.target.value = obj._repr_html_()


async def model_chunks(text: str, raw: widgets.HTML, size: int, delay: float):
    """``text`` as a model would stream it: ``size`` characters per chunk, ``delay`` apart."""
    sent = ""
    for start in range(0, len(text), size):
        piece = text[start:start + size]
        sent += piece
        raw.value = f"<pre style='white-space:pre-wrap'>{html.escape(sent)}</pre>"
        yield TextDelta(id="t1", text=piece)
        await asyncio.sleep(delay)

# %% [markdown]
# ## The control
#
# Pick what the guard looks for, how many characters each chunk carries, and how fast they come.

# %%
box = widgets.Textarea(value=SAMPLE, placeholder="Type text with an e-mail, a phone number…",
                       layout=widgets.Layout(width="100%", height="5em"))
kinds = widgets.SelectMultiple(options=["email", "phone", "credit-card", "ip-address", "url"],
                               value=["email", "phone", "credit-card"], description="detect",
                               rows=5)
size = widgets.IntSlider(value=3, min=1, max=12, description="chars/chunk")
delay = widgets.FloatSlider(value=0.05, min=0.0, max=0.3, step=0.01, description="delay (s)")
button = widgets.Button(description="Stream it", button_style="primary", icon="play")
raw_pane = widgets.HTML(layout=widgets.Layout(width="50%"))
guarded_pane = widgets.HTML(layout=widgets.Layout(width="50%"))
runs: list[asyncio.Task] = []


async def stream_through_guard(text: str) -> None:
    guard = PIIDetector(detection_types=list(kinds.value))
    source = model_chunks(text, raw_pane, size.value, delay.value)
    await skdisplay.live(ops.apply(source, guard), handle=WidgetHandle(guarded_pane),
                         min_interval=0)


def on_click(_button) -> None:
    # A widget callback is a plain function; the stream runs as a task on the kernel's loop.
    runs.append(asyncio.ensure_future(stream_through_guard(box.value)))


button.on_click(on_click)
display(widgets.VBox([box, widgets.HBox([kinds, widgets.VBox([size, delay, button])]),
                      widgets.HBox([widgets.VBox([widgets.Label("the model sent"), raw_pane]),
                                    widgets.VBox([widgets.Label("the client sees"),
                                                  guarded_pane])])]))

# %% [markdown]
# ## Typing for you
#
# Setting the box's value and clicking from code does what your keyboard and mouse do.

# %%
box.value = SAMPLE + " Or mail grace@example.org."
delay.value = 0.0
button.click()
await runs[-1]

# %% [markdown]
# What the client received, as a plain output (the same HTML as the right pane):

# %%
display(HTML(guarded_pane.value))
