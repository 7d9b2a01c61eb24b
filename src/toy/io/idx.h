// io/idx.h — IDX files (the format of MNIST and Fashion-MNIST), plain or gzip-compressed, a
// labelled image set read from a pair of them, and one greyscale image from a PGM or PNG file.
//
// An IDX file is a big-endian header, then the values row-major:
//   0x00 0x00 <type> <n_dims>   type 0x08 = unsigned byte (the only one toy reads)
//   n_dims × uint32             the sizes, outermost first, e.g. 60000 28 28
//   Π sizes × uint8             the values
// Not here: what the images are used for (archs/vit.h, recipes/vit.h).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace toy {

// A missing, unreadable or malformed IDX file; the message names the file.
struct IdxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Idx {
  std::vector<int64_t> dims;    // outermost first, e.g. {60000, 28, 28}
  std::vector<uint8_t> values;  // Π dims bytes, row-major
};
// Reads an unsigned-byte IDX file, gzip-compressed or not (zlib reads both). Throws IdxError when
// the file is missing, the header is not an unsigned-byte IDX header, a size is 0 or the values
// are more than 2^31 bytes, or the file ends early or goes on after the values.
Idx read_idx(const std::string& path);

// Labelled images: n greyscale images of rows × cols pixels and a class for each.
struct ImageSet {
  int64_t n = 0, rows = 0, cols = 0;  // e.g. 10000, 28, 28
  std::vector<uint8_t> pixels;        // [n, rows, cols], 0 (black) … 255
  std::vector<uint8_t> labels;        // [n], each < n_class
};
// `<dir>/<split>-images-idx3-ubyte.gz` and `<dir>/<split>-labels-idx1-ubyte.gz` (split "train" or
// "t10k", the MNIST names). Throws IdxError for a bad file, for image and label counts that
// differ, or for a label ≥ n_class.
ImageSet read_image_set(const std::string& dir, const std::string& split, int n_class);

// A PGM image (binary P5 or plain P2, maxval 1…255, '#' comments) as a set of one image with label
// 0, its pixels scaled to 0…255. Throws IdxError naming the file when it is missing or malformed.
ImageSet read_pgm(const std::string& path);
// A PNG image (any colour type or bit depth; libpng turns colour into grey and composites
// transparency on black, the background of Fashion-MNIST), as read_pgm returns it. Throws
// IdxError naming the file when it is missing, not a PNG, damaged or over 4096 pixels a side.
ImageSet read_png(const std::string& path);
// read_png for a file that starts with PNG's signature, read_pgm otherwise.
ImageSet read_image(const std::string& path);

}  // namespace toy
