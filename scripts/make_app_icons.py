"""Draw the app icons of the web app manifest (assets/icons/*.png) once: `python scripts/make_app_icons.py`.

A white power symbol on the app's indigo: "any" icons with rounded corners and the symbol large,
"maskable" ones filling the square with the symbol inside the safe zone (the middle 80 %), and the
180 px apple-touch-icon iOS uses for the home screen.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

INDIGO = (62, 99, 221, 255)  # Radix indigo 9, the theme's accent colour
WHITE = (255, 255, 255, 255)
OUT = Path(__file__).resolve().parent.parent / "assets" / "icons"
SCALE = 4  # drawn larger, then scaled down: smooth edges


def _symbol(draw: ImageDraw.ImageDraw, size: int, extent: float) -> None:
    """The power symbol centred, `extent` of the side wide."""
    centre = size / 2
    radius = size * extent / 2
    width = max(2, round(size * extent * 0.12))
    box = (centre - radius, centre - radius * 0.9, centre + radius, centre + radius * 1.1)
    draw.arc(box, start=-50, end=230, fill=WHITE, width=width)
    top = centre - radius * 1.05
    draw.rounded_rectangle((centre - width / 2, top, centre + width / 2, centre + radius * 0.05),
                           radius=width / 2, fill=WHITE)


def icon(size: int, maskable: bool) -> Image.Image:
    big = size * SCALE
    image = Image.new("RGBA", (big, big), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    if maskable:
        draw.rectangle((0, 0, big, big), fill=INDIGO)
        _symbol(draw, big, 0.42)
    else:
        draw.rounded_rectangle((0, 0, big - 1, big - 1), radius=big * 0.22, fill=INDIGO)
        _symbol(draw, big, 0.56)
    return image.resize((size, size), Image.Resampling.LANCZOS)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for size in (192, 512):
        icon(size, maskable=False).save(OUT / f"icon-{size}.png", optimize=True)
        icon(size, maskable=True).save(OUT / f"icon-maskable-{size}.png", optimize=True)
    icon(180, maskable=True).convert("RGB").save(OUT / "apple-touch-icon.png", optimize=True)


if __name__ == "__main__":
    main()
