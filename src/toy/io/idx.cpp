// io/idx.cpp — reading IDX files through zlib (gzread passes an uncompressed file through as is).
#include "toy/io/idx.h"

#include <png.h>
#include <zlib.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

namespace toy {

namespace {

constexpr int64_t kMaxValues = int64_t(1) << 31;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

// Reads exactly n bytes; false when the file ends first.
bool read_exactly(gzFile f, void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const unsigned chunk = unsigned(std::min<size_t>(n, size_t(1) << 30));
    const int got = gzread(f, p, chunk);
    if (got <= 0) return false;
    p += got, n -= size_t(got);
  }
  return true;
}

}  // namespace

Idx read_idx(const std::string& path) {
  auto fail = [&](const std::string& what) { return IdxError(path + ": " + what); };
  if (!std::filesystem::is_regular_file(path)) throw fail("no such file");
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) throw fail("cannot open");
  uint8_t magic[4];
  if (!read_exactly(f.get(), magic, 4)) throw fail("shorter than an IDX header");
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] == 0 || magic[3] > 4)
    throw fail("not an unsigned-byte IDX file (header bytes 00 00 08 <1..4> expected)");
  Idx idx;
  int64_t count = 1;
  for (int d = 0; d < magic[3]; ++d) {
    uint8_t b[4];
    if (!read_exactly(f.get(), b, 4)) throw fail("the header ends inside the sizes");
    const int64_t n = int64_t(b[0]) << 24 | int64_t(b[1]) << 16 | int64_t(b[2]) << 8 | int64_t(b[3]);
    if (n == 0) throw fail("dimension " + std::to_string(d) + " has size 0");
    count *= n;
    if (count > kMaxValues) throw fail("more than 2^31 values");
    idx.dims.push_back(n);
  }
  idx.values.resize(size_t(count));
  if (!read_exactly(f.get(), idx.values.data(), idx.values.size()))
    throw fail("ends before its " + std::to_string(count) + " values (truncated or corrupt)");
  uint8_t extra;
  if (gzread(f.get(), &extra, 1) != 0) throw fail("goes on after its " + std::to_string(count) + " values");
  return idx;
}

ImageSet read_image_set(const std::string& dir, const std::string& split, int n_class) {
  const std::string images = dir + "/" + split + "-images-idx3-ubyte.gz";
  const std::string labels = dir + "/" + split + "-labels-idx1-ubyte.gz";
  Idx x = read_idx(images), y = read_idx(labels);
  if (x.dims.size() != 3) throw IdxError(images + ": expected 3 dimensions [n, rows, cols]");
  if (y.dims.size() != 1) throw IdxError(labels + ": expected 1 dimension [n]");
  if (x.dims[0] != y.dims[0])
    throw IdxError(images + " holds " + std::to_string(x.dims[0]) + " images but " + labels + " " +
                   std::to_string(y.dims[0]) + " labels");
  for (size_t i = 0; i < y.values.size(); ++i)
    if (y.values[i] >= n_class)
      throw IdxError(labels + ": label " + std::to_string(y.values[i]) + " of item " + std::to_string(i) +
                     " is not below " + std::to_string(n_class));
  return {.n = x.dims[0],
          .rows = x.dims[1],
          .cols = x.dims[2],
          .pixels = std::move(x.values),
          .labels = std::move(y.values)};
}

ImageSet read_pgm(const std::string& path) {
  auto fail = [&](const std::string& what) { return IdxError(path + ": " + what); };
  if (!std::filesystem::is_regular_file(path)) throw fail("no such file");
  if (std::filesystem::file_size(path) > (size_t(1) << 26)) throw fail("larger than 64 MiB: not a small PGM image");
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t pos = 2;
  // The next header number, after white space and comments; -1 when there is none.
  auto number = [&]() -> int64_t {
    while (pos < bytes.size() && (std::isspace(uint8_t(bytes[pos])) || bytes[pos] == '#')) {
      if (bytes[pos] == '#') {
        while (pos < bytes.size() && bytes[pos] != '\n') ++pos;
      } else {
        ++pos;
      }
    }
    int64_t v = -1;
    for (; pos < bytes.size() && std::isdigit(uint8_t(bytes[pos])) && v < (int64_t(1) << 20); ++pos)
      v = (v < 0 ? 0 : v * 10) + (bytes[pos] - '0');
    return v;
  };
  if (bytes.size() < 2 || bytes[0] != 'P' || (bytes[1] != '5' && bytes[1] != '2'))
    throw fail("not a PGM image (P5 or P2 expected)");
  const bool plain = bytes[1] == '2';
  const int64_t cols = number(), rows = number(), maxval = number();
  if (cols < 1 || rows < 1 || cols > 4096 || rows > 4096) throw fail("width and height must be in [1, 4096]");
  if (maxval < 1 || maxval > 255) throw fail("maxval must be in [1, 255] (8-bit grey)");
  ImageSet s{.n = 1, .rows = rows, .cols = cols, .pixels = std::vector<uint8_t>(size_t(rows * cols)), .labels = {0}};
  if (!plain) ++pos;  // the one white-space byte after maxval
  for (size_t i = 0; i < s.pixels.size(); ++i) {
    int64_t v = -1;
    if (plain)
      v = number();
    else if (pos < bytes.size())
      v = uint8_t(bytes[pos++]);
    if (v < 0 || v > maxval) throw fail("ends early or holds a value above maxval at pixel " + std::to_string(i));
    s.pixels[i] = uint8_t(v * 255 / maxval);
  }
  return s;
}

ImageSet read_png(const std::string& path) {
  auto fail = [&](const std::string& what) { return IdxError(path + ": " + what); };
  if (!std::filesystem::is_regular_file(path)) throw fail("no such file");
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str()))
    throw fail(std::string("not a readable PNG image (") + image.message + ")");
  if (image.width < 1 || image.height < 1 || image.width > 4096 || image.height > 4096) {
    png_image_free(&image);
    throw fail("width and height must be in [1, 4096]");
  }
  image.format = PNG_FORMAT_GRAY;  // 8-bit grey: libpng converts colour and removes alpha (on black)
  ImageSet s{.n = 1,
             .rows = int64_t(image.height),
             .cols = int64_t(image.width),
             .pixels = std::vector<uint8_t>(PNG_IMAGE_SIZE(image)),
             .labels = {0}};
  if (!png_image_finish_read(&image, /*background=*/nullptr, s.pixels.data(), /*row_stride=*/0, nullptr))
    throw fail(std::string("damaged PNG image (") + image.message + ")");  // finish_read has freed `image`
  return s;
}

ImageSet read_image(const std::string& path) {
  unsigned char signature[8] = {};
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(signature), sizeof signature);
  return png_sig_cmp(signature, 0, sizeof signature) == 0 ? read_png(path) : read_pgm(path);
}

}  // namespace toy
