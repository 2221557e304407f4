#!/usr/bin/python3
"""Fashion-MNIST reader shared by the fixture scripts (make_fashion_mnist.py,
make_qat_model.py, torch_fx_ptq.py).

Reads the IDX files of Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz) and returns
numpy arrays. The one preprocessing every model and tool uses is `preprocess`:

    x = (pixel / 255 - MEAN) / STD,   MEAN = 0.2860, STD = 0.3530

(the training set's pixel mean and standard deviation), giving float32 [N, 1, 28, 28].

As a command, `--write-test-npy DIR` writes DIR/test_images.npy (10000x1x28x28 float32,
preprocessed) and DIR/test_labels.npy (10000 int64) for tools that do not read IDX files;
`--write-calib-labels FILE` writes the labels of the calibration samples (200 int64, in
calib_200.npy's order) after checking that the images drawn match calib_200.npy.
Needs python3-numpy only.
"""
import argparse
import gzip
import os
import struct

import numpy as np

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"
MEAN = 0.2860
STD = 0.3530
CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot")

_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
               0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path):
    """Returns the array stored in an IDX file (gzip-compressed when the name ends in .gz)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: not an IDX file (bad magic)")
    code, ndim = data[2], data[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"{path}: unknown IDX element type 0x{code:02x}")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{path}: truncated IDX header")
    shape = struct.unpack(">" + "I" * ndim, data[4:header])
    dtype = np.dtype(_IDX_DTYPES[code])
    count = int(np.prod(shape, dtype=np.int64))
    if len(data) - header != count * dtype.itemsize:
        raise ValueError(f"{path}: expected {count} elements of shape {shape}, "
                         f"found {len(data) - header} bytes")
    array = np.frombuffer(data, dtype=dtype, count=count, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=True)


def load_split(split, data_dir=DEFAULT_DIR):
    """Returns (images uint8 [N, 28, 28], labels int64 [N]) for split "train" or "test"."""
    prefix = {"train": "train", "test": "t10k"}[split]
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz")).astype(np.int64)
    if images.ndim != 3 or images.shape[0] != labels.shape[0]:
        raise ValueError(f"{split}: {images.shape[0]} images with shape {images.shape} "
                         f"but {labels.shape[0]} labels")
    return images, labels


def preprocess(images):
    """uint8 [N, 28, 28] -> float32 [N, 1, 28, 28], (x / 255 - MEAN) / STD."""
    x = images.astype(np.float32)[:, None, :, :] / np.float32(255.0)
    return ((x - np.float32(MEAN)) / np.float32(STD)).astype(np.float32)


def load(split, data_dir=DEFAULT_DIR):
    """Returns (preprocessed float32 [N, 1, 28, 28], labels int64 [N])."""
    images, labels = load_split(split, data_dir)
    return preprocess(images), labels


def calibration_indices(count=200, seed=20260101, total=60000):
    """The training-set indices of the calibration samples: `count` distinct indices drawn
    with numpy's PCG64 generator seeded with `seed`, in drawn order."""
    return np.random.default_rng(seed).choice(total, size=count, replace=False)


def write_calib_labels(path, data_dir):
    """Labels of the calibration draw; refuses when the drawn images differ from the committed
    calib_200.npy (a different dataset copy or draw)."""
    x, y = load("train", data_dir)
    indices = calibration_indices()
    calib = np.load(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                 "models", "fashion_mnist", "calib_200.npy"))
    if not np.array_equal(x[indices], calib):
        raise SystemExit("the calibration draw does not reproduce models/fashion_mnist/calib_200.npy")
    np.save(path, y[indices].astype(np.int64))
    print(f"wrote {path} {y[indices].shape} int64")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=DEFAULT_DIR, help="folder holding the IDX .gz files")
    parser.add_argument("--write-test-npy", metavar="DIR",
                        help="write DIR/test_images.npy and DIR/test_labels.npy")
    parser.add_argument("--write-calib-labels", metavar="FILE",
                        help="write the labels of models/fashion_mnist/calib_200.npy's samples")
    args = parser.parse_args()
    if not args.write_test_npy and not args.write_calib_labels:
        parser.error("nothing to do: give --write-test-npy DIR or --write-calib-labels FILE")
    if args.write_calib_labels:
        write_calib_labels(args.write_calib_labels, args.data_dir)
    if not args.write_test_npy:
        return
    x, y = load("test", args.data_dir)
    os.makedirs(args.write_test_npy, exist_ok=True)
    np.save(os.path.join(args.write_test_npy, "test_images.npy"), x)
    np.save(os.path.join(args.write_test_npy, "test_labels.npy"), y)
    print(f"wrote {args.write_test_npy}/test_images.npy {x.shape} {x.dtype} and "
          f"test_labels.npy {y.shape} {y.dtype}")


if __name__ == "__main__":
    main()
