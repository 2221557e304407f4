"""Synthetic photographs for segmentation models: a figure (head and torso) on a sky over ground.

scene(rng=None) draws one 1x3xHxW float32 image in [-0.5, 0.5] (the 0.5-centred input of
background-removal models). Without rng it is the fixed scene the model-zoo benchmark has
always used; with one, the sky, ground line, colours, figure position, size and pose, a
second object and the noise vary, so calibration and held-out sets are different pictures.
"""
import numpy as np


def scene(rng=None, size=1024):
    h = w = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    if rng is None:
        sky = [(0.3, 0.4, 0.0), (0.5, 0.0, 0.2), (0.7, -0.3, 0.0)]  # per channel: base, x slope, y slope
        ground_y, ground = 700, (0.35, 0.3, 0.2)
        cx, head_y, scale, colour, second = 512, 300, 1.0, (0.8, 0.25, 0.2), None
        noise_rng, noise = np.random.default_rng(1), 0.02
    else:
        sky = [(rng.uniform(0.2, 0.8), rng.uniform(-0.3, 0.3), rng.uniform(-0.3, 0.3)) for _ in range(3)]
        ground_y, ground = rng.uniform(0.55, 0.8) * h, tuple(rng.uniform(0.1, 0.6, 3))
        scale = rng.uniform(0.6, 1.3)
        cx, head_y = rng.uniform(0.25, 0.75) * w, ground_y - rng.uniform(380, 420) * scale * h / 1024
        colour = tuple(rng.uniform(0.0, 1.0, 3))
        second = (rng.uniform(0.05, 0.95) * w, ground_y, rng.uniform(40, 160) * h / 1024, tuple(rng.uniform(0, 1, 3)))
        noise_rng, noise = rng, rng.uniform(0.005, 0.04)
    img = np.zeros((3, h, w), np.float32)
    for c, (base, x_slope, y_slope) in enumerate(sky):
        img[c] = base + x_slope * xx / w + y_slope * yy / h
    img[:, yy > ground_y] = np.array(ground, np.float32)[:, None]
    if second is not None:  # a box on the ground (a bench, a rock) that is not the subject
        x0, y0, half, box = second
        inside = (np.abs(xx - x0) < half) & (yy < y0) & (yy > y0 - 1.2 * half)
        img[:, inside] = np.array(box, np.float32)[:, None]
    s = scale * h / 1024
    head = ((xx - cx) / (70 * s)) ** 2 + ((yy - head_y) / (85 * s)) ** 2 < 1
    torso = ((xx - cx) / (150 * s)) ** 2 + ((yy - head_y - 260 * s) / (220 * s)) ** 2 < 1
    figure = head | torso
    for c in range(3):
        img[c][figure] = colour[c]
    img += noise_rng.normal(0, noise, img.shape).astype(np.float32)
    return (img - 0.5)[None].astype(np.float32)
