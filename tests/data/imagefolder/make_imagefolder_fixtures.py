#!/usr/bin/env python3
"""Makes tests/data/imagefolder/: a small image folder in torchvision's ImageFolder layout and what
torchvision's loading does to it, for `imagefolder:DIR` (frontend/image_folder.cc) to match.

- train/ and val/ with classes ankle_boot and bag: JPEG (RGB and gray), PNG (RGB, RGBA, gray, palette),
  of several sizes (some smaller than 32x32, some larger, one in a subfolder), and a .txt file that
  ImageFolder skips.
- expected.npz: for each split, the images in torchvision.datasets.ImageFolder's order, loaded by its
  default loader (PIL, convert("RGB")) and resized by transforms.Resize((32, 32)) (PIL BILINEAR), as uint8
  (N, 3, 32, 32) `train_rgb`/`val_rgb`; the same through convert("L") as (N, 1, 32, 32) `train_gray`;
  and the labels `train_labels`/`val_labels`.

- ../imagefolder_png_depths/: 8x8 PNGs whose samples are not 8-bit sRGB (16-bit RGB, RGBA, gray and gray
  with alpha; 8-bit RGB with a gAMA chunk of 1.0), written byte by byte here since Pillow writes no 16-bit
  colour PNG, and expected.npz beside them: PIL's convert("RGB") of each, as uint8 (N, 3, 8, 8) `rgb`.
  PIL cuts 16-bit colour to its high byte, clips 16-bit gray (mode I;16) to 255 and ignores gAMA.

- ../imagefolder_jpeg_cmyk/: 8x8 CMYK JPEGs as Pillow writes them (an Adobe marker, inverted samples:
  what Photoshop and print workflows write), and expected.npz: PIL's convert("RGB") of each, as uint8
  (N, 3, 8, 8) `rgb`.

Run with a Python that has torchvision (and so Pillow): python make_imagefolder_fixtures.py
"""
import os
import struct
import zlib

import numpy as np
import torchvision
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE = (32, 32)


def picture(rng, height, width):
    """A smooth colour gradient with noise: JPEG and resampling both have something to do."""
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([255 * x / max(width - 1, 1), 255 * y / max(height - 1, 1), 128 + 100 * np.sin(x / 3.0)], -1)
    return np.clip(base + rng.normal(0, 20, base.shape), 0, 255).astype(np.uint8)


def write_images():
    rng = np.random.default_rng(3)
    files = {
        "train/ankle_boot/a.jpg": ("RGB", 30, 40),
        "train/ankle_boot/b.png": ("RGBA", 24, 20),
        "train/ankle_boot/nested/c.jpg": ("L", 50, 50),
        "train/bag/d.png": ("L", 48, 64),
        "train/bag/e.png": ("P", 16, 16),
        "train/bag/f.jpg": ("RGB", 32, 32),
        "val/ankle_boot/g.jpg": ("RGB", 36, 36),
        "val/bag/h.png": ("RGB", 28, 40),
    }
    for name, (mode, height, width) in files.items():
        path = os.path.join(HERE, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        rgb = Image.fromarray(picture(rng, height, width))
        if mode == "RGBA":
            image = rgb.convert("RGBA")
            image.putalpha(Image.fromarray(rng.integers(0, 256, (height, width), dtype=np.uint8)))
        else:
            image = rgb.convert(mode)
        image.save(path, quality=90) if name.endswith(".jpg") else image.save(path)
    with open(os.path.join(HERE, "train/bag/notes.txt"), "w") as f:
        f.write("ImageFolder skips files that are not images\n")


def expected():
    arrays = {}
    resize = torchvision.transforms.Resize(SIZE)  # PIL images: BILINEAR
    for split in ("train", "val"):
        folder = torchvision.datasets.ImageFolder(os.path.join(HERE, split))
        assert folder.classes == ["ankle_boot", "bag"], folder.classes
        rgb, gray, labels = [], [], []
        for path, label in folder.samples:
            image = folder.loader(path)  # PIL, convert("RGB")
            rgb.append(np.asarray(resize(image)).transpose(2, 0, 1))
            gray.append(np.asarray(resize(image.convert("L")))[None])
            labels.append(label)
        arrays[split + "_rgb"] = np.stack(rgb)
        arrays[split + "_gray"] = np.stack(gray)
        arrays[split + "_labels"] = np.array(labels, dtype=np.int64)
        print(split, [os.path.relpath(p, HERE) for p, _ in folder.samples])
    np.savez(os.path.join(HERE, "expected.npz"), **arrays)
    print("torchvision", torchvision.__version__, {k: v.shape for k, v in arrays.items()})


def png_bytes(samples, bit_depth, color_type, gamma=None):
    """A PNG of `samples` (height, width, channels), big-endian when 16-bit, with an optional gAMA chunk."""
    height, width = samples.shape[:2]
    data = samples.astype(">u2" if bit_depth == 16 else np.uint8)
    raw = b"".join(b"\x00" + data[y].tobytes() for y in range(height))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0))
    extra = chunk(b"gAMA", struct.pack(">I", gamma)) if gamma else b""
    return b"\x89PNG\r\n\x1a\n" + header + extra + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def write_png_depths():
    root = os.path.join(HERE, "..", "imagefolder_png_depths")
    rng = np.random.default_rng(5)
    files = {  # name: (samples, bit depth, colour type, gAMA)
        "a/gray16.png": (rng.integers(0, 600, (8, 8, 1)), 16, 0, None),  # PIL clips the values above 255
        "a/gray_alpha16.png": (rng.integers(0, 65536, (8, 8, 2)), 16, 4, None),
        "a/rgb16.png": (rng.integers(0, 65536, (8, 8, 3)), 16, 2, None),
        "b/gamma_linear.png": (rng.integers(0, 256, (8, 8, 3)), 8, 2, 100000),
        "b/rgba16.png": (rng.integers(0, 65536, (8, 8, 4)), 16, 6, None),
    }
    for name, (samples, depth, color, gamma) in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(png_bytes(samples, depth, color, gamma))
    folder = torchvision.datasets.ImageFolder(root)
    rgb = [np.asarray(folder.loader(path)).transpose(2, 0, 1) for path, _ in folder.samples]
    np.savez(os.path.join(root, "expected.npz"), rgb=np.stack(rgb))
    print("png depths", [os.path.relpath(p, root) for p, _ in folder.samples])


def write_cmyk_jpegs():
    root = os.path.join(HERE, "..", "imagefolder_jpeg_cmyk")
    rng = np.random.default_rng(7)
    for name, quality in (("a/cmyk.jpg", 95), ("b/cmyk_q60.jpg", 60)):
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (8, 8, 4), dtype=np.uint8), "CMYK").save(path, quality=quality)
    folder = torchvision.datasets.ImageFolder(root)
    assert all(Image.open(path).mode == "CMYK" for path, _ in folder.samples)
    rgb = [np.asarray(folder.loader(path)).transpose(2, 0, 1) for path, _ in folder.samples]
    np.savez(os.path.join(root, "expected.npz"), rgb=np.stack(rgb))
    print("cmyk jpegs", [os.path.relpath(p, root) for p, _ in folder.samples])


if __name__ == "__main__":
    write_images()
    expected()
    write_png_depths()
    write_cmyk_jpegs()
